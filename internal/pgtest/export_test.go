package pgtest

import (
	"context"
	"database/sql"
	"os"
)

// Server exposes a private server, separate from the shared one, so tests
// can watch it start and stop.
type Server = server

// StartServer starts a server that only the caller uses.
func StartServer(ctx context.Context) (*Server, error) {
	binDir, err := findBinDir(os.Getenv(EnvBinDir), debianRoot, defaultLookPath)
	if err != nil {
		return nil, err
	}
	return startServer(ctx, binDir)
}

func (s *server) Dir() string     { return s.dir }
func (s *server) Running() bool   { return s.running() }
func (s *server) Admin() *sql.DB  { return s.admin }
func (s *server) Stop() error     { return s.stop(true) }
func (s *server) Port() int       { return s.port }
func (s *server) LogTail() string { return s.log.tail() }

var (
	FindBinDir = findBinDir
	DBName     = dbName
)
