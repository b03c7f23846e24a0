package state

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
)

// pgSchemaV1 creates version 1 of the database layout. Names compare bytewise (COLLATE "C"), as the bbolt
// file's keys do, whatever the database's locale. Records are json (not jsonb), which keeps the documents
// byte for byte, \u0000 escapes included.
const pgSchemaV1 = `
CREATE TABLE e2b_mcp_meta (
	key   text PRIMARY KEY,
	value bytea NOT NULL
);
CREATE TABLE e2b_mcp_owners (
	owner  text COLLATE "C" PRIMARY KEY,
	record json NOT NULL
);
CREATE TABLE e2b_mcp_sessions (
	owner  text COLLATE "C" NOT NULL,
	id     text COLLATE "C" NOT NULL, -- the session's name
	record json NOT NULL,
	PRIMARY KEY (owner, id)
);
CREATE TABLE e2b_mcp_sandboxes (
	owner  text COLLATE "C" NOT NULL,
	id     text COLLATE "C" NOT NULL,
	record json NOT NULL,
	PRIMARY KEY (owner, id)
);
CREATE TABLE e2b_mcp_checkpoints (
	owner  text COLLATE "C" NOT NULL,
	id     text COLLATE "C" NOT NULL,
	record json NOT NULL,
	PRIMARY KEY (owner, id)
);
CREATE TABLE e2b_mcp_documents (
	name text PRIMARY KEY,
	body bytea
);
`

// pgSchemaV2 adds what replicas on several hosts must share beyond the records (see postgres_secrets.go and
// postgres_connect.go): the encrypted key store's entries, sealed under the operator's master key exactly as in
// the key store file, and the connect page's links and browser sessions, each keyed by the SHA-256 of its ID or
// cookie so that the database never holds a value that opens the page.
const pgSchemaV2 = `
CREATE TABLE e2b_mcp_secrets (
	account text COLLATE "C" PRIMARY KEY,
	sealed  bytea NOT NULL
);
CREATE TABLE e2b_mcp_connect_links (
	id_hash bytea PRIMARY KEY,
	owner   text COLLATE "C" NOT NULL,
	expires timestamptz NOT NULL
);
CREATE INDEX e2b_mcp_connect_links_expires ON e2b_mcp_connect_links (expires);
CREATE TABLE e2b_mcp_connect_sessions (
	id_hash    bytea PRIMARY KEY,
	link_hash  bytea NOT NULL REFERENCES e2b_mcp_connect_links (id_hash) ON DELETE CASCADE,
	owner      text COLLATE "C" NOT NULL,
	signing_in boolean NOT NULL,
	expires    timestamptz NOT NULL
);
CREATE INDEX e2b_mcp_connect_sessions_link ON e2b_mcp_connect_sessions (link_hash);
CREATE INDEX e2b_mcp_connect_sessions_expires ON e2b_mcp_connect_sessions (expires);
`

// pgSchemaV3 adds the used nonces of the server's single-use tickets (see tickets.go), so that replicas honour
// a ticket once between them.
const pgSchemaV3 = `
CREATE TABLE e2b_mcp_ticket_nonces (
	nonce   text COLLATE "C" PRIMARY KEY,
	expires timestamptz NOT NULL
);
CREATE INDEX e2b_mcp_ticket_nonces_expires ON e2b_mcp_ticket_nonces (expires);
`

// pgSchemaV4 adds the tool calls answered as tasks (see tasks.go), so that any replica answers for a task.
const pgSchemaV4 = `
CREATE TABLE e2b_mcp_tasks (
	owner  text COLLATE "C" NOT NULL,
	id     text COLLATE "C" NOT NULL,
	record json NOT NULL,
	PRIMARY KEY (owner, id)
);
`

// pgSchemaV5 adds the places held in owners' sandbox caps (see reservations.go).
const pgSchemaV5 = `
CREATE TABLE e2b_mcp_reservations (
	owner  text COLLATE "C" NOT NULL,
	id     text COLLATE "C" NOT NULL,
	record json NOT NULL,
	PRIMARY KEY (owner, id)
);
`

// pgSchemaV6 adds the owners' use per day (see usage.go).
const pgSchemaV6 = `
CREATE TABLE e2b_mcp_usage (
	owner  text COLLATE "C" NOT NULL,
	id     text COLLATE "C" NOT NULL, -- the day, 2006-01-02 (UTC)
	record json NOT NULL,
	PRIMARY KEY (owner, id)
);
`

// pgMigrations is the list OpenPostgres applies: entry i is the SQL that takes the database from schema version
// i+1 to i+2, as schemaMigrations does for the bbolt file. The current version is len(pgMigrations())+1. Append
// only; never edit an entry once released.
func pgMigrations() []string {
	return []string{pgSchemaV2, pgSchemaV3, pgSchemaV4, pgSchemaV5, pgSchemaV6}
}

func (s *Postgres) currentVersion() int { return len(s.migrations) + 1 }

// schemaLockKey is the advisory lock that serialises creating and migrating the tables between processes that
// open the store at the same moment.
const schemaLockKey = 0x6532626d6370 // "e2bmcp"

// prepare creates the tables in an empty database or brings an older layout to the current version, in one
// transaction under the advisory lock: a crash leaves the previous version, and replicas starting together
// migrate once.
func (s *Postgres) prepare() error {
	return s.inTx(pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(ctx context.Context, tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(schemaLockKey)); err != nil {
			return s.dbError(err)
		}
		var exists bool
		if err := tx.QueryRow(ctx, "SELECT to_regclass('e2b_mcp_meta') IS NOT NULL").Scan(&exists); err != nil {
			return s.dbError(err)
		}
		if !exists {
			if _, err := tx.Exec(ctx, pgSchemaV1); err != nil {
				return fmt.Errorf("state store %s: creating the tables: %w", s.where, err)
			}
			if _, err := tx.Exec(ctx, "INSERT INTO e2b_mcp_meta (key, value) VALUES ($1, $2), ($3, $4)",
				metaApplication, []byte(applicationMarker), metaSchema, []byte("1")); err != nil {
				return fmt.Errorf("state store %s: creating the tables: %w", s.where, err)
			}
		}
		version, err := s.readSchema(ctx, tx, true)
		if err != nil {
			return err
		}
		for v := version; v < s.currentVersion(); v++ {
			if _, err := tx.Exec(ctx, s.migrations[v-1]); err != nil {
				return fmt.Errorf("state store %s: migrating schema %d to %d: %w", s.where, v, v+1, err)
			}
		}
		if version == s.currentVersion() {
			return nil
		}
		_, err = tx.Exec(ctx, "UPDATE e2b_mcp_meta SET value = $2 WHERE key = $1",
			metaSchema, []byte(strconv.Itoa(s.currentVersion())))
		return s.dbError(err)
	})
}

// readSchema checks the application marker and returns the schema version, refusing newer ones. lock takes the
// version's row for update (a migration); otherwise a write transaction takes it for share, so that a
// migration waits for the writes of the old layout in flight, and they for it.
func (s *Postgres) readSchema(ctx context.Context, tx pgx.Tx, lock bool) (int, error) {
	var app []byte
	err := tx.QueryRow(ctx, "SELECT value FROM e2b_mcp_meta WHERE key = $1", metaApplication).Scan(&app)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && string(app) != applicationMarker) {
		return 0, fmt.Errorf("%w: %s has an e2b_mcp_meta table that is not e2b-mcp's (application marker %q); "+
			"it was left untouched", ErrUnusable, s.where, app)
	}
	if err != nil {
		return 0, s.dbError(err)
	}
	q := "SELECT value FROM e2b_mcp_meta WHERE key = $1"
	if lock {
		q += " FOR UPDATE"
	}
	var raw []byte
	if err := tx.QueryRow(ctx, q, metaSchema).Scan(&raw); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return 0, s.dbError(err)
	}
	version, err := strconv.Atoi(string(raw))
	if err != nil || version < 1 {
		return 0, fmt.Errorf("%w: %s has an invalid schema version %q; it was left untouched", ErrUnusable, s.where, raw)
	}
	if version > s.currentVersion() {
		return 0, fmt.Errorf("%w: %s has schema version %d, newer than the %d this e2b-mcp understands; "+
			"upgrade e2b-mcp (the database was left untouched)", ErrUnusable, s.where, version, s.currentVersion())
	}
	return version, nil
}

// checkSchema runs at the start of every transaction: the database must still be at exactly the version this
// store writes.
func (s *Postgres) checkSchema(ctx context.Context, tx pgx.Tx, write bool) error {
	_, err := s.checkSchemaKey(ctx, tx, write)
	return err
}

// checkSchemaKey is checkSchema that also returns the data key's check value (nil when there is none), read in
// the same query; a write transaction holds both rows FOR SHARE until it ends (see Postgres.run).
func (s *Postgres) checkSchemaKey(ctx context.Context, tx pgx.Tx, write bool) ([]byte, error) {
	q := "SELECT key, value FROM e2b_mcp_meta WHERE key IN ($1, $2)"
	if write {
		q += " FOR SHARE"
	}
	rows, err := tx.Query(ctx, q, metaSchema, metaKeyCheck)
	if err != nil {
		return nil, s.dbError(err)
	}
	var (
		key             string
		value, raw, chk []byte
	)
	if _, err := pgx.ForEachRow(rows, []any{&key, &value}, func() error {
		if key == metaSchema {
			raw = bytes.Clone(value)
		} else {
			chk = bytes.Clone(value)
		}
		return nil
	}); err != nil {
		return nil, s.dbError(err)
	}
	if raw == nil {
		return nil, fmt.Errorf("%w: %s has lost its schema version; it was left untouched", ErrUnusable, s.where)
	}
	if version, err := strconv.Atoi(string(raw)); err != nil || version != s.currentVersion() {
		return nil, fmt.Errorf("%w: %s has schema version %q but this store was opened at version %d; reopen it",
			ErrUnusable, s.where, raw, s.currentVersion())
	}
	return chk, nil
}
