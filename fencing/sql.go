package fencing

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"regexp"
	"time"

	"go.opentelemetry.io/otel/metric"
)

// DefaultSQLTable is the fence table SQLGuard uses unless WithSQLTable says
// otherwise.
const DefaultSQLTable = "redfence_fences"

// createTableTimeout bounds the CREATE TABLE that NewSQLGuard runs, since its
// signature has no context.
const createTableTimeout = 30 * time.Second

var sqlIdentifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// SQLGuard is a Guard that keeps the highest token per resource in a
// PostgreSQL table, raised by one upsert per check:
//
//	CREATE TABLE IF NOT EXISTS redfence_fences (
//	    resource TEXT PRIMARY KEY,
//	    token    BIGINT NOT NULL
//	)
//
// Tokens above math.MaxInt64 get ErrInvalidToken. The SQL is PostgreSQL's
// ($n placeholders, ON CONFLICT ... RETURNING). An SQLGuard is safe for
// concurrent use. docs/fencing.md, Guards, shows its statements.
type SQLGuard struct {
	db      *sql.DB
	table   string
	create  string // CREATE TABLE IF NOT EXISTS ...
	probe   string // a query that fails if the table is missing
	upsert  string // the check-and-record statement
	current string // reads the current token
	metrics *guardMetrics
}

// SQLGuardOption configures NewSQLGuard.
type SQLGuardOption interface {
	applySQL(*sqlConfig)
}

type sqlConfig struct {
	table  string
	create bool
	mp     metric.MeterProvider
}

type sqlOptionFunc func(*sqlConfig)

func (f sqlOptionFunc) applySQL(c *sqlConfig) { f(c) }

// WithSQLMeterProvider sets where the guard's check counter (MetricChecks)
// goes. The default is the global OpenTelemetry MeterProvider.
func WithSQLMeterProvider(mp metric.MeterProvider) SQLGuardOption {
	return sqlOptionFunc(func(c *sqlConfig) { c.mp = mp })
}

// WithSQLTable sets the fence table's name. It must be a plain identifier,
// matching [A-Za-z_][A-Za-z0-9_]* and at most 63 bytes long (PostgreSQL's
// limit), or NewSQLGuard returns ErrInvalidArgument; this keeps the name,
// which cannot be a query parameter, from injecting SQL. It is used
// unquoted, so PostgreSQL folds it to lower case. The default is
// DefaultSQLTable, "redfence_fences".
func WithSQLTable(name string) SQLGuardOption {
	return sqlOptionFunc(func(c *sqlConfig) { c.table = name })
}

// WithSQLCreateTable sets whether NewSQLGuard creates the fence table (CREATE
// TABLE IF NOT EXISTS, bounded by a 30 s timeout). Turn it off when
// migrations own the schema, and create the table with the DDL shown on
// SQLGuard or with CreateTable. The default is true.
func WithSQLCreateTable(create bool) SQLGuardOption {
	return sqlOptionFunc(func(c *sqlConfig) { c.create = create })
}

// NewSQLGuard returns an SQLGuard that stores fences in db, creating the
// fence table unless WithSQLCreateTable(false) is given. It fails on a nil
// db, an invalid table name (both ErrInvalidArgument) or an error creating
// the table.
func NewSQLGuard(db *sql.DB, opts ...SQLGuardOption) (*SQLGuard, error) {
	cfg := sqlConfig{table: DefaultSQLTable, create: true}
	for _, o := range opts {
		if o != nil {
			o.applySQL(&cfg)
		}
	}
	if db == nil {
		return nil, invalid("db", "NewSQLGuard was given a nil *sql.DB")
	}
	if !sqlIdentifier.MatchString(cfg.table) || len(cfg.table) > 63 {
		return nil, invalid("table", "SQL table name %q: want a plain identifier matching [A-Za-z_][A-Za-z0-9_]*, at most 63 bytes", cfg.table)
	}
	t := cfg.table
	g := &SQLGuard{
		db:      db,
		table:   t,
		create:  "CREATE TABLE IF NOT EXISTS " + t + " (resource TEXT PRIMARY KEY, token BIGINT NOT NULL)",
		probe:   "SELECT resource, token FROM " + t + " WHERE false",
		upsert:  "INSERT INTO " + t + " AS f (resource, token) VALUES ($1, $2) ON CONFLICT (resource) DO UPDATE SET token = EXCLUDED.token WHERE f.token <= EXCLUDED.token RETURNING token",
		current: "SELECT token FROM " + t + " WHERE resource = $1",
		metrics: defaultGuardMetrics("sql"),
	}
	if cfg.mp != nil {
		g.metrics = newGuardMetrics(cfg.mp, "sql")
	}
	if cfg.create {
		ctx, cancel := context.WithTimeout(context.Background(), createTableTimeout)
		defer cancel()
		if err := g.CreateTable(ctx); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// Table returns the fence table's name.
func (g *SQLGuard) Table() string {
	if g == nil {
		return ""
	}
	return g.table
}

// CreateTable creates the fence table if it does not exist. NewSQLGuard calls
// it unless WithSQLCreateTable(false) was given. A CREATE that loses a race
// with another creator is not an error once the table exists.
func (g *SQLGuard) CreateTable(ctx context.Context) error {
	if g == nil {
		return invalid("guard", "CreateTable on a nil *SQLGuard")
	}
	_, err := g.db.ExecContext(ctx, g.create)
	if err == nil {
		return nil
	}
	// Concurrent CREATE TABLE IF NOT EXISTS can fail in PostgreSQL with a
	// unique violation on the catalog; the table exists then.
	if _, probeErr := g.db.ExecContext(ctx, g.probe); probeErr == nil {
		return nil
	}
	return fmt.Errorf("fencing: creating SQL fence table %s: %w", g.table, err)
}

// Check implements Guard with one autocommitted upsert (docs/fencing.md,
// Guards).
//
// On its own, Check does not protect a write made afterwards in another
// statement: a newer holder may pass Check and write in between. Use CheckTx
// for that.
func (g *SQLGuard) Check(ctx context.Context, resource string, t Token) error {
	if g == nil {
		return invalid("guard", "Check on a nil *SQLGuard")
	}
	return g.check(ctx, g.db, resource, t)
}

// CheckTx is Check run inside the caller's transaction tx, and the way to
// use SQLGuard: make the protected writes in tx after CheckTx succeeds, then
// commit, so that the fence and the writes commit or roll back together. The
// fence row's lock holds off every other CheckTx for resource until tx ends,
// so writers are serialised in token order. After an error, roll tx back.
// Above READ COMMITTED, PostgreSQL may fail a waiting CheckTx with a
// serialization error, to be retried as usual.
func (g *SQLGuard) CheckTx(ctx context.Context, tx *sql.Tx, resource string, t Token) error {
	if g == nil {
		return invalid("guard", "CheckTx on a nil *SQLGuard")
	}
	if tx == nil {
		return invalid("tx", "CheckTx was given a nil *sql.Tx")
	}
	return g.check(ctx, tx, resource, t)
}

// queryRower is what *sql.DB and *sql.Tx have in common that check needs.
type queryRower interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func (g *SQLGuard) check(ctx context.Context, q queryRower, resource string, t Token) (err error) {
	defer func() { g.metrics.record(ctx, err) }()
	if err := validate(resource, t); err != nil {
		return err
	}
	if t > math.MaxInt64 {
		return fmt.Errorf("%w: %d is above the SQL fence column's BIGINT range (max %d)", ErrInvalidToken, t, int64(math.MaxInt64))
	}
	var got int64
	err = q.QueryRowContext(ctx, g.upsert, resource, int64(t)).Scan(&got)
	if err == nil {
		return nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("fencing: sql check for resource %q: %w", resource, err)
	}
	var cur int64
	if err := q.QueryRowContext(ctx, g.current, resource).Scan(&cur); err != nil {
		return fmt.Errorf("%w %d for resource %q (reading the current token failed: %w)", ErrStaleToken, t, resource, err)
	}
	return &StaleTokenError{Resource: resource, Token: t, Current: Token(cur)}
}
