package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeSystem is the environment a redisFinder sees in a test.
type fakeSystem struct {
	files        map[string]string // name -> path of executables on "PATH"
	env          map[string]string
	root         bool
	installErr   error
	installs     int
	afterInstall map[string]string // executables that appear after a successful install
}

func (s *fakeSystem) finder() redisFinder {
	return redisFinder{
		lookPath: func(name string) (string, error) {
			if p, ok := s.files[name]; ok {
				return p, nil
			}
			return "", &exec.Error{Name: name, Err: exec.ErrNotFound}
		},
		getenv: func(k string) string { return s.env[k] },
		isRoot: func() bool { return s.root },
		install: func(ctx context.Context, stdout, stderr io.Writer) error {
			s.installs++
			if s.installErr != nil {
				return s.installErr
			}
			for k, v := range s.afterInstall {
				s.files[k] = v
			}
			return nil
		},
	}
}

func TestRedisFinder(t *testing.T) {
	const bin = "/usr/bin/redis-server"
	tests := []struct {
		name         string
		sys          fakeSystem
		explicit     string
		want         string
		wantErr      error  // checked with errors.Is when set
		wantErrText  string // substring of the error when set
		wantInstalls int
		wantStderr   string
	}{
		{
			name: "on PATH",
			sys:  fakeSystem{files: map[string]string{"redis-server": bin}},
			want: bin,
		},
		{
			name:     "flag wins over env",
			sys:      fakeSystem{files: map[string]string{"/opt/r": "/opt/r", "/env/r": "/env/r"}, env: map[string]string{"REDFENCE_REDIS_SERVER": "/env/r"}},
			explicit: "/opt/r",
			want:     "/opt/r",
		},
		{
			name: "env",
			sys:  fakeSystem{files: map[string]string{"/env/r": "/env/r", "redis-server": bin}, env: map[string]string{"REDFENCE_REDIS_SERVER": "/env/r"}},
			want: "/env/r",
		},
		{
			name:        "missing explicit binary is not installed over",
			sys:         fakeSystem{files: map[string]string{"apt-get": "/usr/bin/apt-get"}, root: true},
			explicit:    "/nope/redis-server",
			wantErrText: `redis-server "/nope/redis-server" (from -redis-server) is not an executable`,
		},
		{
			name:        "missing env binary",
			sys:         fakeSystem{files: map[string]string{"redis-server": bin}, env: map[string]string{"REDFENCE_REDIS_SERVER": "/bad"}},
			wantErrText: "(from $REDFENCE_REDIS_SERVER)",
		},
		{
			name:    "missing, not root",
			sys:     fakeSystem{files: map[string]string{"apt-get": "/usr/bin/apt-get"}},
			wantErr: errNoRedis,
		},
		{
			name:    "missing, root without apt-get",
			sys:     fakeSystem{files: map[string]string{}, root: true},
			wantErr: errNoRedis,
		},
		{
			name:         "missing, root with apt-get: installed",
			sys:          fakeSystem{files: map[string]string{"apt-get": "/usr/bin/apt-get"}, root: true, afterInstall: map[string]string{"redis-server": bin}},
			want:         bin,
			wantInstalls: 1,
			wantStderr:   "redis-server not found; installing it with apt-get\n",
		},
		{
			name:         "install fails",
			sys:          fakeSystem{files: map[string]string{"apt-get": "/usr/bin/apt-get"}, root: true, installErr: errors.New("apt broke")},
			wantErrText:  "installing redis-server with apt-get: apt broke",
			wantInstalls: 1,
			wantStderr:   "redis-server not found; installing it with apt-get\n",
		},
		{
			name:         "installed but still not on PATH",
			sys:          fakeSystem{files: map[string]string{"apt-get": "/usr/bin/apt-get"}, root: true},
			wantErrText:  "still not on PATH",
			wantInstalls: 1,
			wantStderr:   "redis-server not found; installing it with apt-get\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			got, err := tt.sys.finder().find(t.Context(), tt.explicit, &stdout, &stderr)
			switch {
			case tt.wantErr != nil:
				require.ErrorIs(t, err, tt.wantErr)
			case tt.wantErrText != "":
				require.ErrorContains(t, err, tt.wantErrText)
			default:
				require.NoError(t, err)
				assert.Equal(t, tt.want, got)
			}
			assert.Equal(t, tt.wantInstalls, tt.sys.installs)
			assert.Equal(t, tt.wantStderr, stderr.String())
		})
	}
}

func TestErrNoRedisMessage(t *testing.T) {
	assert.Equal(t, "redis-server not found: install it with `sudo apt-get install redis-server` (Debian/Ubuntu) or set REDFENCE_REDIS_SERVER", errNoRedis.Error())
}
