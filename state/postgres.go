package state

import (
	"context"
	"crypto/cipher"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Postgres is the store that replicas share: the same records as Bolt's, one table per kind of record, in a PostgreSQL
// database. Every operation is one transaction: reads see one snapshot, and a read-modify-write (UpdateSandbox, a
// session's claim) locks its row with SELECT ... FOR UPDATE, so replicas never lose each other's updates; a decision
// over all of an owner's records (a new session within the owner's bound) locks the owner's row the same way. Each
// operation, connection included, must finish within Options.LockTimeout; past it the error wraps ErrBusy and names the
// database.
//
// The tables (see pgMigrations) are created in the connection's search_path, so one database can hold several
// stores in different schemas (?search_path=NAME in the URL). e2b_mcp_meta holds the application marker, the
// schema version and the data key's check value; as in the bbolt file, a database of another program or of a
// newer e2b-mcp is refused and left as it is, and every transaction re-checks the version.
type Postgres struct {
	records // the Store methods

	pool       *pgxpool.Pool
	keys       KeySource
	timeout    time.Duration
	redialFor  time.Duration // see inTx; none while the store opens
	migrations []string
	closed     atomic.Bool

	key keyCache // the data key's AEAD once checked against the database
}

// OpenPostgres connects to the database at dbURL (postgres://user:password@host:port/db?options), creates the
// store's tables if missing and migrates an older schema.
func OpenPostgres(dbURL string, opts Options) (*Postgres, error) {
	return openPostgres(dbURL, opts, pgMigrations())
}

func openPostgres(dbURL string, opts Options, migrations []string) (*Postgres, error) {
	if opts.Keys == nil {
		return nil, errors.New("state store: Options.Keys is required")
	}
	where := URLWithoutPassword(dbURL)
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		// pgx's message quotes the URL with its password masked.
		return nil, fmt.Errorf("state store %s: %w", where, err)
	}
	s := &Postgres{keys: opts.Keys, timeout: opts.LockTimeout, migrations: migrations}
	s.records = newRecords(pgRunner{s}, opts, where)
	if s.timeout <= 0 {
		s.timeout = DefaultLockTimeout
	}
	cfg.ConnConfig.ConnectTimeout = s.timeout
	if s.pool, err = pgxpool.NewWithConfig(context.Background(), cfg); err != nil {
		return nil, fmt.Errorf("state store %s: %w", where, err)
	}
	if err := s.prepare(); err != nil {
		s.pool.Close()
		return nil, err
	}
	// A database out of reach at the start is reported at once; once open, the store rides out its restarts.
	s.redialFor = opts.RedialFor
	if s.redialFor == 0 {
		s.redialFor = DefaultRedialFor
	}
	return s, nil
}

// Ping asks the database for an answer within ctx (and LockTimeout).
func (s *Postgres) Ping(ctx context.Context) error {
	if s.closed.Load() {
		return ErrClosed
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	return s.dbError(s.pool.Ping(ctx))
}

// Close closes the connections; later operations return ErrClosed.
func (s *Postgres) Close() error {
	if s.closed.Load() {
		return nil
	}
	s.steps.stop()
	if s.closed.Swap(true) {
		return nil
	}
	s.pool.Close()
	s.key.reset()
	return nil
}

// URLWithoutPassword is a database URL with its password removed (from the user part and the query), for
// messages and for commands shown to a human: pgx finds the password in PGPASSWORD or ~/.pgpass as well.
func URLWithoutPassword(dbURL string) string {
	u, err := url.Parse(dbURL)
	if err != nil {
		return "(a PostgreSQL URL that does not parse)"
	}
	if u.User != nil {
		u.User = url.User(u.User.Username())
	}
	q := u.Query()
	for k := range q {
		if strings.Contains(strings.ToLower(k), "password") {
			q.Del(k)
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// pgRunner runs the record logic's transactions on a Postgres.
type pgRunner struct{ s *Postgres }

func (r pgRunner) view(fn func(recordTx) error) error   { return r.s.run(false, fn) }
func (r pgRunner) update(fn func(recordTx) error) error { return r.s.run(true, fn) }

// run runs fn in one transaction: a read-only snapshot, or a read-committed write transaction whose gets lock
// their rows.
func (s *Postgres) run(write bool, fn func(recordTx) error) error {
	opts := pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}
	if write {
		opts = pgx.TxOptions{IsoLevel: pgx.ReadCommitted}
	}
	return s.inTx(opts, func(ctx context.Context, tx pgx.Tx) error {
		// A write transaction holds the key check value FOR SHARE from its start, before any row lock, so that a
		// data key rotation (which takes it FOR UPDATE, then the sandboxes) neither deadlocks with it nor commits
		// between its key check and the token it seals; see RotateDataKey.
		check, err := s.checkSchemaKey(ctx, tx, write)
		if err != nil {
			return err
		}
		return fn(pgTx{s: s, ctx: ctx, tx: tx, write: write, check: check})
	})
}

// inTx runs fn in a transaction within the store's timeout, and names the database in any error. An attempt that
// fails because the database could not be reached, did not answer, or dropped the connection before the
// transaction committed is made again (fn included, so fn must not keep anything of an attempt that failed), on
// a new connection with backoff, until redialFor has passed since the first: a restart or a failover of the
// database (pg_ctl restart takes a second or two) costs calls time, not their results. A write whose commit
// went unanswered is not made again, as whether it took effect is unknown.
func (s *Postgres) inTx(opts pgx.TxOptions, fn func(context.Context, pgx.Tx) error) error {
	start := time.Now()
	wait := redialFirstWait
	for {
		err, again := s.attemptTx(opts, fn)
		if !again || s.closed.Load() || time.Since(start)+wait > s.redialFor {
			return err
		}
		time.Sleep(wait)
		wait = min(2*wait, redialMaxWait)
	}
}

// DefaultRedialFor is Options.RedialFor's default, as long as the E2B client redials E2B (e2b.Config.RedialFor):
// past a restart of the database, short of what an operator would call an outage.
const DefaultRedialFor = 15 * time.Second

// The backoff between attempts of a transaction the database could not take.
const (
	redialFirstWait = 50 * time.Millisecond
	redialMaxWait   = time.Second
)

// attemptTx runs fn in a transaction once; again reports whether the attempt failed for want of the database
// and changed nothing, so that it may be made again.
func (s *Postgres) attemptTx(opts pgx.TxOptions, fn func(context.Context, pgx.Tx) error) (err error, again bool) {
	if s.closed.Load() {
		return ErrClosed, false
	}
	// A write's lock waits end at the timeout with PostgreSQL's own error (lock_timeout, set in the transaction
	// rather than at connect, which poolers such as PgBouncer refuse), which tells a lock held by a stuck process
	// from a database that does not answer: the attempt's deadline is a little later, and passing it means no
	// answer came.
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout+answerMargin)
	defer cancel()
	tx, err := s.pool.BeginTx(ctx, opts)
	if err != nil {
		return s.txError(ctx, err, nil), unreachable(ctx, err)
	}
	// A write transaction's ID, asked for first, tells after a commit went unanswered whether it took effect.
	var xid int64
	if opts.AccessMode != pgx.ReadOnly {
		var lockTimeout string
		if err := tx.QueryRow(ctx, "SELECT txid_current(), set_config('lock_timeout', $1, true)",
			strconv.FormatInt(s.timeout.Milliseconds(), 10)).Scan(&xid, &lockTimeout); err != nil {
			_ = tx.Rollback(ctx)
			return s.txError(ctx, err, nil), unreachable(ctx, err)
		}
	}
	if fnErr := fn(ctx, tx); fnErr != nil {
		_ = tx.Rollback(ctx)
		return s.txError(ctx, fnErr, fnErr), unreachable(ctx, fnErr)
	}
	err = tx.Commit(ctx)
	switch {
	case err == nil:
		return nil, false
	case !unreachable(ctx, err):
		return s.txError(ctx, err, nil), false
	case opts.AccessMode == pgx.ReadOnly || pgconn.SafeToRetry(err):
		return s.txError(ctx, err, nil), true // it changed nothing, whatever became of its commit
	}
	committed, known := s.outcome(xid)
	switch {
	case !known:
		return s.txError(ctx, err, nil), false
	case committed:
		return nil, false
	}
	return s.txError(ctx, err, nil), true
}

// outcome asks the database, on a new connection, whether the write transaction xid committed; known is false when
// that cannot be learned within redialFor.
func (s *Postgres) outcome(xid int64) (committed, known bool) {
	deadline := time.Now().Add(s.redialFor)
	for wait := redialFirstWait; ; wait = min(2*wait, redialMaxWait) {
		ctx, cancel := context.WithTimeout(context.Background(), s.timeout+answerMargin)
		var status *string
		err := s.pool.QueryRow(ctx, "SELECT txid_status($1)", xid).Scan(&status)
		cancel()
		switch {
		case err == nil && status != nil && *status == "committed":
			return true, true
		case err == nil && status != nil && *status == "aborted":
			return false, true
		case err == nil && status != nil && *status == "in progress":
			// The old connection's backend has not yet ended it: ask again.
		case err != nil && unreachable(ctx, err):
		default: // too old to be known (NULL), or the database refuses to say
			return false, false
		}
		if s.closed.Load() || time.Now().Add(wait).After(deadline) {
			return false, false
		}
		time.Sleep(wait)
	}
}

// answerMargin is how much longer than its lock timeout an attempt waits for the database's answer.
const answerMargin = time.Second

// unreachable reports whether err says that the database could not be reached, did not answer within ctx, or
// dropped the connection (it shut down or restarts): what a new connection may cure.
func unreachable(ctx context.Context, err error) bool {
	var pgErr *pgconn.PgError
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	switch {
	case errors.As(err, &pgErr):
		// admin_shutdown, crash_shutdown, cannot_connect_now (starting up or shutting down).
		return pgErr.Code == "57P01" || pgErr.Code == "57P02" || pgErr.Code == "57P03"
	case ctx.Err() != nil, errors.As(err, &connectErr), errors.As(err, &netErr), errors.Is(err, io.EOF),
		errors.Is(err, io.ErrUnexpectedEOF), pgconn.SafeToRetry(err):
		return true
	}
	return false
}

// txError is the error of a failed attempt, fnErr set when fn's own error ended it, naming the database.
func (s *Postgres) txError(ctx context.Context, err, fnErr error) error {
	var pgErr *pgconn.PgError
	switch {
	case s.closed.Load():
		return ErrClosed
	case ctx.Err() != nil:
		return &Error{where: s.where, err: ErrBusy, what: fmt.Sprintf("did not answer within %s "+
			"(is the database reachable?)", s.timeout+answerMargin)}
	case errors.As(err, &pgErr) && pgErr.Code == "55P03": // lock_not_available: lock_timeout passed
		return &Error{where: s.where, err: ErrBusy, what: fmt.Sprintf("did not complete an operation within %s "+
			"(is a lock held by a stuck process?)", s.timeout)}
	case fnErr != nil:
		var named *Error
		switch {
		case errors.As(err, &named):
		case errors.Is(err, ErrDataKeyChanged):
			// What the caller can do about it is the one thing to say: this process must be restarted.
			return &Error{where: s.where, err: err, what: "was sealed again under a new data key (e2b-mcp keys " +
				"rotate-data) after this server read the old one: restart this server"}
		case errors.Is(err, ErrUnusable):
			// The store's own checks name the database in their words: the operator's log has them.
			return &Error{where: s.where, err: err, what: "cannot be used as it is (the server's log says why)"}
		}
		return err // the database errors in it are named by dbError already
	}
	return s.dbError(err) // connecting, beginning or committing
}

// dbError names the database in an error of the driver (see Error), and says what failed without its address.
func (s *Postgres) dbError(err error) error {
	if err == nil {
		return nil
	}
	var pgErr *pgconn.PgError
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	what := "failed (the server's log has the driver's error)"
	switch {
	case errors.As(err, &connectErr):
		// Its text names the host, the port, the user and the database.
		what = "could not be connected to"
	case errors.As(err, &pgErr):
		what = fmt.Sprintf("refused an operation: %s (SQLSTATE %s)", pgErr.Message, pgErr.Code)
	case errors.As(err, &netErr), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), pgconn.SafeToRetry(err):
		what = "dropped the connection or did not answer"
	}
	return &Error{where: s.where, what: what, err: err}
}

// pgTable is the table of a kind of record. Its columns are owner, id (a session's name for sessions) and the
// record as JSON, the document the bbolt file holds.
func pgTable(table string) string { return "e2b_mcp_" + table }

// pgTx is a recordTx of the database.
type pgTx struct {
	s     *Postgres
	ctx   context.Context
	tx    pgx.Tx
	write bool
	check []byte // the data key's check value as the transaction began (held FOR SHARE in a write one)
}

// storable: PostgreSQL's text holds neither NUL bytes nor invalid UTF-8, and no record has such a name, so a
// lookup by one finds nothing rather than failing.
func storable(names ...string) bool {
	for _, n := range names {
		if n != "" && checkName("", n) != nil {
			return false
		}
	}
	return true
}

func (t pgTx) get(table, owner, id string) ([]byte, error) {
	if !storable(owner, id) {
		return nil, nil
	}
	q := "SELECT record FROM " + pgTable(table) + " WHERE owner = $1 AND id = $2"
	if t.write {
		q += " FOR UPDATE"
	}
	var v []byte
	err := t.tx.QueryRow(t.ctx, q, owner, id).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	return v, t.s.dbError(err)
}

func (t pgTx) put(table, owner, id string, v []byte) error {
	_, err := t.tx.Exec(t.ctx, "INSERT INTO "+pgTable(table)+" (owner, id, record) VALUES ($1, $2, $3) "+
		"ON CONFLICT (owner, id) DO UPDATE SET record = EXCLUDED.record", owner, id, string(v))
	return t.s.dbError(err)
}

func (t pgTx) del(table, owner, id string) (bool, error) {
	if !storable(owner, id) {
		return false, nil
	}
	tag, err := t.tx.Exec(t.ctx, "DELETE FROM "+pgTable(table)+" WHERE owner = $1 AND id = $2", owner, id)
	return tag.RowsAffected() > 0, t.s.dbError(err)
}

func (t pgTx) each(table, owner string, fn func(owner, id string, v []byte) error) error {
	q := "SELECT owner, id, record FROM " + pgTable(table)
	var args []any
	if owner != "" {
		if !storable(owner) {
			return nil
		}
		q += " WHERE owner = $1"
		args = append(args, owner)
	}
	rows, err := t.tx.Query(t.ctx, q+" ORDER BY owner, id", args...)
	if err != nil {
		return t.s.dbError(err)
	}
	// All rows are read before fn runs: fn may query too (the data key's check value), and a connection
	// serves one query at a time.
	type row struct {
		owner, id string
		record    []byte
	}
	all, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		err := r.Scan(&x.owner, &x.id, &x.record)
		return x, err
	})
	if err != nil {
		return t.s.dbError(err)
	}
	for _, r := range all {
		if err := fn(r.owner, r.id, r.record); err != nil {
			return err
		}
	}
	return nil
}

// countBy has the database count: the records never leave it.
func (t pgTx) countBy(table, field string) (map[string]int, error) {
	rows, err := t.tx.Query(t.ctx, "SELECT COALESCE(record->>$1, ''), count(*) FROM "+pgTable(table)+" GROUP BY 1", field)
	if err != nil {
		return nil, t.s.dbError(err)
	}
	counts := map[string]int{}
	var (
		value string
		n     int
	)
	_, err = pgx.ForEachRow(rows, []any{&value, &n}, func() error {
		counts[value] = n
		return nil
	})
	return counts, t.s.dbError(err)
}

func (t pgTx) ensureOwner(owner string, now time.Time) error {
	v, err := json.Marshal(ownerV1{Created: now})
	if err != nil {
		return err
	}
	_, err = t.tx.Exec(t.ctx, "INSERT INTO e2b_mcp_owners (owner, record) VALUES ($1, $2) ON CONFLICT (owner) DO NOTHING",
		owner, string(v))
	return t.s.dbError(err)
}

// holdOwner locks the owner's row. The ensureOwner before it does not: INSERT ... ON CONFLICT DO NOTHING leaves
// an existing row unlocked.
func (t pgTx) holdOwner(owner string) error {
	_, err := t.tx.Exec(t.ctx, "SELECT 1 FROM e2b_mcp_owners WHERE owner = $1 FOR UPDATE", owner)
	return t.s.dbError(err)
}

func (t pgTx) owners() ([]string, error) {
	rows, err := t.tx.Query(t.ctx, "SELECT owner FROM e2b_mcp_owners ORDER BY owner")
	if err != nil {
		return nil, t.s.dbError(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return out, t.s.dbError(err)
}

// cipher is the database's keyCache.cipher: the check value is in e2b_mcp_meta, which a write transaction holds
// FOR SHARE from its start (see run), so a rotation cannot commit between this check and the token the
// transaction seals. A write transaction adds the check value when there is none (the first of several replicas
// to do so wins; the others check their key against it).
func (t pgTx) cipher() (cipher.AEAD, error) {
	s := t.s
	var create func(box []byte) ([]byte, error)
	if t.write {
		create = func(box []byte) ([]byte, error) {
			if _, err := t.tx.Exec(t.ctx, "INSERT INTO e2b_mcp_meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING",
				metaKeyCheck, box); err != nil {
				return nil, s.dbError(err)
			}
			return t.meta(metaKeyCheck, "")
		}
	}
	return s.key.cipher(s.keys, s.where, t.check, create)
}

// meta reads a value of e2b_mcp_meta, locked as lock says (" FOR SHARE", " FOR UPDATE" or ""); nil when it is
// absent.
func (t pgTx) meta(key, lock string) ([]byte, error) {
	var v []byte
	err := t.tx.QueryRow(t.ctx, "SELECT value FROM e2b_mcp_meta WHERE key = $1"+lock, key).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	return v, t.s.dbError(err)
}

// Document is a named document that processes sharing the database read and replace whole, one at a time (the
// approvals of calls that wait for a human are one).
func (s *Postgres) Document(name string) *PostgresDocument {
	return &PostgresDocument{s: s, name: name}
}

// PostgresDocument is a row of e2b_mcp_documents.
type PostgresDocument struct {
	s    *Postgres
	name string
}

// Location names the document in messages.
func (d *PostgresDocument) Location() string {
	return fmt.Sprintf("document %q in %s", d.name, d.s.where)
}

// Update calls fn with the document (nil when there is none yet) in one transaction. With write set the row is
// locked (created first if missing), so updates of several processes follow one another, and a non-nil result
// replaces the document when the transaction commits.
func (d *PostgresDocument) Update(write bool, fn func(doc []byte) ([]byte, error)) error {
	opts := pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}
	if write {
		opts = pgx.TxOptions{IsoLevel: pgx.ReadCommitted}
	}
	s := d.s
	return s.inTx(opts, func(ctx context.Context, tx pgx.Tx) error {
		if err := s.checkSchema(ctx, tx, write); err != nil {
			return err
		}
		q := "SELECT body FROM e2b_mcp_documents WHERE name = $1"
		if write {
			if _, err := tx.Exec(ctx, "INSERT INTO e2b_mcp_documents (name) VALUES ($1) ON CONFLICT (name) DO NOTHING",
				d.name); err != nil {
				return s.dbError(err)
			}
			q += " FOR UPDATE"
		}
		var body []byte
		if err := tx.QueryRow(ctx, q, d.name).Scan(&body); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return s.dbError(err)
		}
		next, err := fn(body)
		if err != nil || next == nil || !write {
			return err
		}
		_, err = tx.Exec(ctx, "UPDATE e2b_mcp_documents SET body = $2 WHERE name = $1", d.name, next)
		return s.dbError(err)
	})
}

// Put replaces the document.
func (d *PostgresDocument) Put(body []byte) error {
	return d.s.inTx(pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(ctx context.Context, tx pgx.Tx) error {
		if err := d.s.checkSchema(ctx, tx, true); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "INSERT INTO e2b_mcp_documents (name, body) VALUES ($1, $2) "+
			"ON CONFLICT (name) DO UPDATE SET body = EXCLUDED.body", d.name, body)
		return d.s.dbError(err)
	})
}

// Get returns the document; ErrNotFound when there is none.
func (d *PostgresDocument) Get() ([]byte, error) {
	var body []byte
	err := d.Update(false, func(doc []byte) ([]byte, error) {
		body = doc
		return nil, nil
	})
	if err == nil && body == nil {
		err = fmt.Errorf("%s: %w", d.Location(), ErrNotFound)
	}
	return body, err
}

// DropDocuments deletes the documents whose names start with prefix, but for those named prefix+k for a k in
// keep.
func (s *Postgres) DropDocuments(prefix string, keep []string) error {
	names := make([]string, len(keep))
	for i, k := range keep {
		names[i] = prefix + k
	}
	return s.inTx(pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(ctx context.Context, tx pgx.Tx) error {
		if err := s.checkSchema(ctx, tx, true); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "DELETE FROM e2b_mcp_documents WHERE starts_with(name, $1) AND NOT (name = ANY($2))",
			prefix, names)
		return s.dbError(err)
	})
}
