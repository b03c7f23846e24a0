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
// metaSecretsCheck.

const metaSecretsCheck = "secrets_check"

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
	return s.inTx(pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(ctx context.Context, tx pgx.Tx) error {
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

// SealedSecret returns the sealed value stored under account; an error wrapping ErrNotFound when there is none.
func (s *Postgres) SealedSecret(account string) ([]byte, error) {
	var box []byte
	err := s.read(func(ctx context.Context, tx pgx.Tx) error {
		if !storable(account) {
			return nil
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

// PutSealedSecret stores box under account, replacing what was there.
func (s *Postgres) PutSealedSecret(account string, box []byte) error {
	if err := checkName("account", account); err != nil {
		return err
	}
	return s.write(func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "INSERT INTO e2b_mcp_secrets (account, sealed) VALUES ($1, $2) "+
			"ON CONFLICT (account) DO UPDATE SET sealed = EXCLUDED.sealed", account, box)
		return s.dbError(err)
	})
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

// AddSealedSecret stores box under account unless the account holds a secret already; it reports whether it
// stored it.
func (s *Postgres) AddSealedSecret(account string, box []byte) (bool, error) {
	if err := checkName("account", account); err != nil {
		return false, err
	}
	added := false
	err := s.write(func(ctx context.Context, tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, "INSERT INTO e2b_mcp_secrets (account, sealed) VALUES ($1, $2) ON CONFLICT (account) DO NOTHING",
			account, box)
		added = tag.RowsAffected() > 0
		return s.dbError(err)
	})
	return added, err
}
