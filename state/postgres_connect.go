package state

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// connectLockKey is the advisory lock under which a replica counts the unexpired links before it adds one, so
// that replicas adding at once cannot pass the bounds together.
const connectLockKey = schemaLockKey + 1

// Connects is the ConnectStore of replicas: the tables e2b_mcp_connect_links and e2b_mcp_connect_sessions,
// holding links and sessions within limits. A session's row goes with its link's (ON DELETE CASCADE), and
// spending a link is one DELETE ... RETURNING, which only one transaction can win.
func (s *Postgres) Connects(limits ConnectLimits) ConnectStore {
	return pgConnects{s: s, limits: limits}
}

type pgConnects struct {
	s      *Postgres
	limits ConnectLimits
}

func (c pgConnects) AddConnectLink(k ConnectKey, l ConnectLink, now time.Time) error {
	if err := checkName("owner", l.Owner); err != nil {
		return err
	}
	return c.s.write(func(ctx context.Context, tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(connectLockKey)); err != nil {
			return c.s.dbError(err)
		}
		if _, err := tx.Exec(ctx, "DELETE FROM e2b_mcp_connect_links WHERE expires <= $1", now); err != nil {
			return c.s.dbError(err)
		}
		var owners, all int
		if err := tx.QueryRow(ctx, "SELECT count(*) FILTER (WHERE owner = $1), count(*) FROM e2b_mcp_connect_links",
			l.Owner).Scan(&owners, &all); err != nil {
			return c.s.dbError(err)
		}
		switch {
		case owners >= c.limits.LinksPerOwner:
			if _, err := tx.Exec(ctx, "DELETE FROM e2b_mcp_connect_links WHERE id_hash IN "+
				"(SELECT id_hash FROM e2b_mcp_connect_links WHERE owner = $1 ORDER BY expires LIMIT $2)",
				l.Owner, owners-c.limits.LinksPerOwner+1); err != nil {
				return c.s.dbError(err)
			}
		case all >= c.limits.Links:
			return ErrTooManyConnects
		}
		_, err := tx.Exec(ctx, "INSERT INTO e2b_mcp_connect_links (id_hash, owner, expires) VALUES ($1, $2, $3)",
			k[:], l.Owner, l.Expires)
		return c.s.dbError(err)
	})
}

func (c pgConnects) ConnectLink(k ConnectKey, now time.Time) (ConnectLink, error) {
	var l ConnectLink
	err := c.s.read(func(ctx context.Context, tx pgx.Tx) error {
		err := tx.QueryRow(ctx, "SELECT owner, expires FROM e2b_mcp_connect_links WHERE id_hash = $1 AND expires > $2",
			k[:], now).Scan(&l.Owner, &l.Expires)
		if errors.Is(err, pgx.ErrNoRows) {
			return errConnectNotFound("link")
		}
		return c.s.dbError(err)
	})
	return l, err
}

func (c pgConnects) AddConnectSession(k ConnectKey, sess ConnectSession, now time.Time) error {
	if !storable(sess.Owner) {
		return checkName("owner", sess.Owner)
	}
	return c.s.write(func(ctx context.Context, tx pgx.Tx) error {
		// The link's row is held (FOR UPDATE) until the session is in: it cannot be spent meanwhile and leave a
		// session behind, and the link's sessions are counted and added one transaction at a time.
		var one int
		err := tx.QueryRow(ctx, "SELECT 1 FROM e2b_mcp_connect_links WHERE id_hash = $1 AND expires > $2 FOR UPDATE",
			sess.Link[:], now).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return errConnectNotFound("link")
		}
		if err != nil {
			return c.s.dbError(err)
		}
		if _, err := tx.Exec(ctx, "DELETE FROM e2b_mcp_connect_sessions WHERE link_hash = $1 AND expires <= $2",
			sess.Link[:], now); err != nil {
			return c.s.dbError(err)
		}
		var n int
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM e2b_mcp_connect_sessions WHERE link_hash = $1",
			sess.Link[:]).Scan(&n); err != nil {
			return c.s.dbError(err)
		}
		if n >= c.limits.SessionsPerLink {
			// The sessions not yet proven to be the owner's (owner '') go first, each lot by expiry.
			if _, err := tx.Exec(ctx, "DELETE FROM e2b_mcp_connect_sessions WHERE id_hash IN "+
				"(SELECT id_hash FROM e2b_mcp_connect_sessions WHERE link_hash = $1 ORDER BY owner <> '', expires LIMIT $2)",
				sess.Link[:], n-c.limits.SessionsPerLink+1); err != nil {
				return c.s.dbError(err)
			}
		}
		_, err = tx.Exec(ctx, "INSERT INTO e2b_mcp_connect_sessions (id_hash, link_hash, owner, signing_in, expires) "+
			"VALUES ($1, $2, $3, $4, $5)", k[:], sess.Link[:], sess.Owner, sess.SigningIn, sess.Expires)
		return c.s.dbError(err)
	})
}

func (c pgConnects) ConnectSession(k ConnectKey, now time.Time) (ConnectSession, error) {
	var sess ConnectSession
	err := c.s.read(func(ctx context.Context, tx pgx.Tx) error {
		var link []byte
		err := tx.QueryRow(ctx, "SELECT s.link_hash, s.owner, s.signing_in, s.expires FROM e2b_mcp_connect_sessions s "+
			"JOIN e2b_mcp_connect_links l ON l.id_hash = s.link_hash WHERE s.id_hash = $1 AND s.expires > $2 AND l.expires > $2",
			k[:], now).Scan(&link, &sess.Owner, &sess.SigningIn, &sess.Expires)
		if errors.Is(err, pgx.ErrNoRows) {
			return errConnectNotFound("session")
		}
		if err != nil {
			return c.s.dbError(err)
		}
		if len(link) != len(sess.Link) {
			return errConnectNotFound("session")
		}
		copy(sess.Link[:], link)
		return nil
	})
	return sess, err
}

func (c pgConnects) DeleteConnectSession(k ConnectKey) error {
	return c.s.write(func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "DELETE FROM e2b_mcp_connect_sessions WHERE id_hash = $1", k[:])
		return c.s.dbError(err)
	})
}

func (c pgConnects) SpendConnectLink(k ConnectKey, now time.Time) (ConnectLink, error) {
	var l ConnectLink
	err := c.s.write(func(ctx context.Context, tx pgx.Tx) error {
		err := tx.QueryRow(ctx, "DELETE FROM e2b_mcp_connect_links WHERE id_hash = $1 RETURNING owner, expires",
			k[:]).Scan(&l.Owner, &l.Expires)
		if errors.Is(err, pgx.ErrNoRows) {
			return errConnectNotFound("link")
		}
		return c.s.dbError(err)
	})
	if err == nil && !now.Before(l.Expires) {
		return ConnectLink{}, errConnectNotFound("link")
	}
	return l, err
}
