package state

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// The sealed secrets of e2b_mcp_secrets are the encrypted key store of replicas on several hosts (see
// credentials.DatabaseStore): each owner's E2B API key, the data key and the other secrets the server holds, as
// values sealed by the caller under the operator's master key, which the database never sees. This file only
// keeps the sealed bytes; it never opens them. The check value that tells a wrong master key is the meta entry
// metaSecretsCheck; every operation hands it, read in its own transaction, to the caller's SecretsCheck first, so
// that a process still holding a master key the secrets were sealed again under another (a rotation) neither
// reads nor writes them.

const metaSecretsCheck = "secrets_check"

// SecretsCheck tells whether the sealed check value (nil when there is none) is the caller's master key's; its
// error is the operation's.
type SecretsCheck func(check []byte) error

// write runs fn in one read-committed write transaction, after the schema check every transaction makes.
func (s *Postgres) write(fn func(ctx context.Context, tx pgx.Tx) error) error {
	return s.inTx(pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(ctx context.Context, tx pgx.Tx) error {
		if err := s.checkSchema(ctx, tx, true); err != nil {
			return err
		}
		return fn(ctx, tx)
	})
}

// read runs fn in one read-only snapshot transaction, after the schema check.
func (s *Postgres) read(fn func(ctx context.Context, tx pgx.Tx) error) error {
	return s.inTx(pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
		func(ctx context.Context, tx pgx.Tx) error {
			if err := s.checkSchema(ctx, tx, false); err != nil {
				return err
			}
			return fn(ctx, tx)
		})
}

// SealedSecretsCheck returns the sealed check value of the secrets, storing initial first when there is none:
// of several processes starting on an empty database, the first one's value stays and the others get it to
// check their master key against.
func (s *Postgres) SealedSecretsCheck(initial []byte) ([]byte, error) {
	var check []byte
	err := s.write(func(ctx context.Context, tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "INSERT INTO e2b_mcp_meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING",
			metaSecretsCheck, initial); err != nil {
			return s.dbError(err)
		}
		return s.dbError(tx.QueryRow(ctx, "SELECT value FROM e2b_mcp_meta WHERE key = $1", metaSecretsCheck).Scan(&check))
	})
	return check, err
}

// checkSecrets runs ok on the check value as this transaction sees it; lock holds it against a reseal (FOR SHARE)
// or for one (FOR UPDATE).
func (s *Postgres) checkSecrets(ctx context.Context, tx pgx.Tx, ok SecretsCheck, lock string) error {
	var check []byte
	err := tx.QueryRow(ctx, "SELECT value FROM e2b_mcp_meta WHERE key = $1"+lock, metaSecretsCheck).Scan(&check)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return s.dbError(err)
	}
	return ok(check)
}

// SealedSecret returns the sealed value stored under account; an error wrapping ErrNotFound when there is none.
func (s *Postgres) SealedSecret(account string, ok SecretsCheck) ([]byte, error) {
	var box []byte
	err := s.read(func(ctx context.Context, tx pgx.Tx) error {
		if err := s.checkSecrets(ctx, tx, ok, ""); err != nil || !storable(account) {
			return err
		}
		err := tx.QueryRow(ctx, "SELECT sealed FROM e2b_mcp_secrets WHERE account = $1", account).Scan(&box)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		return s.dbError(err)
	})
	if err == nil && box == nil {
		err = fmt.Errorf("%s has no secret %q: %w", s.where, account, ErrNotFound)
	}
	return box, err
}

// PutSealedSecret stores box under account, replacing what was there unless only is set; it reports whether it
// stored it.
func (s *Postgres) PutSealedSecret(account string, box []byte, only bool, ok SecretsCheck) (bool, error) {
	if err := checkName("account", account); err != nil {
		return false, err
	}
	q := "INSERT INTO e2b_mcp_secrets (account, sealed) VALUES ($1, $2) ON CONFLICT (account) DO UPDATE SET " +
		"sealed = EXCLUDED.sealed"
	if only {
		q = "INSERT INTO e2b_mcp_secrets (account, sealed) VALUES ($1, $2) ON CONFLICT (account) DO NOTHING"
	}
	stored := false
	err := s.write(func(ctx context.Context, tx pgx.Tx) error {
		if err := s.checkSecrets(ctx, tx, ok, " FOR SHARE"); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, q, account, box)
		stored = tag.RowsAffected() > 0
		return s.dbError(err)
	})
	return stored, err
}

// DeleteSealedSecret removes account's secret; an error wrapping ErrNotFound when there was none.
func (s *Postgres) DeleteSealedSecret(account string) error {
	found := false
	err := s.write(func(ctx context.Context, tx pgx.Tx) error {
		if !storable(account) {
			return nil
		}
		tag, err := tx.Exec(ctx, "DELETE FROM e2b_mcp_secrets WHERE account = $1", account)
		found = tag.RowsAffected() > 0
		return s.dbError(err)
	})
	if err == nil && !found {
		err = fmt.Errorf("%s has no secret %q: %w", s.where, account, ErrNotFound)
	}
	return err
}

// ResealSecrets replaces every sealed secret, and the check value, in one transaction that holds them all: ok
// checks the current check value, reseal turns each account's sealed value into its replacement, and check is
// the new check value. Any error leaves everything as it was. It returns how many secrets it replaced.
func (s *Postgres) ResealSecrets(ok SecretsCheck, reseal func(account string, box []byte) ([]byte, error),
	check []byte) (int, error) {
	n := 0
	err := s.write(func(ctx context.Context, tx pgx.Tx) error {
		if err := s.checkSecrets(ctx, tx, ok, " FOR UPDATE"); err != nil {
			return err
		}
		type entry struct {
			account string
			box     []byte
		}
		rows, err := tx.Query(ctx, "SELECT account, sealed FROM e2b_mcp_secrets ORDER BY account FOR UPDATE")
		if err != nil {
			return s.dbError(err)
		}
		entries, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (entry, error) {
			var e entry
			err := r.Scan(&e.account, &e.box)
			return e, err
		})
		if err != nil {
			return s.dbError(err)
		}
		for _, e := range entries {
			box, err := reseal(e.account, e.box)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, "UPDATE e2b_mcp_secrets SET sealed = $2 WHERE account = $1", e.account, box); err != nil {
				return s.dbError(err)
			}
		}
		if _, err := tx.Exec(ctx, "UPDATE e2b_mcp_meta SET value = $2 WHERE key = $1", metaSecretsCheck, check); err != nil {
			return s.dbError(err)
		}
		n = len(entries)
		return nil
	})
	return n, err
}
