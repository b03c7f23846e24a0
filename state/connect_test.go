package state

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// The connect page's links and sessions, against the memory of a server alone and the database of replicas.
func forEachConnectStore(t *testing.T, limit int, test func(t *testing.T, c ConnectStore, other func() ConnectStore)) {
	t.Run("memory", func(t *testing.T) {
		m := NewMemoryConnects(limit)
		test(t, m, func() ConnectStore { return m })
	})
	t.Run("postgres", func(t *testing.T) {
		k := pgKind()
		s, _ := k.newTestStore(t)
		test(t, s.Store.(*Postgres).Connects(limit), func() ConnectStore {
			return k.reopen(t, s, Options{}).Store.(*Postgres).Connects(limit)
		})
	})
}

func wantNotFound(t *testing.T, err error, what string) {
	t.Helper()
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("%s: %v, want ErrNotFound", what, err)
	}
}

func TestConnectLinkIsSpentOnceEverywhere(t *testing.T) {
	forEachConnectStore(t, 100, func(t *testing.T, c ConnectStore, other func() ConnectStore) {
		now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		link, cookie := ConnectKeyOf("link-id"), ConnectKeyOf("cookie")
		if err := c.AddConnectLink(link, ConnectLink{Owner: "alice", Expires: now.Add(time.Minute)}, now); err != nil {
			t.Fatal(err)
		}
		if err := c.AddConnectSession(cookie, ConnectSession{Link: link, Owner: "alice", Expires: now.Add(time.Minute)}, now); err != nil {
			t.Fatal(err)
		}
		if err := c.AddConnectSession(ConnectKeyOf("x"), ConnectSession{Link: ConnectKeyOf("no such link"), Expires: now.Add(time.Minute)}, now); !errors.Is(err, ErrNotFound) {
			t.Fatalf("a session of a link that does not exist: %v", err)
		}
		o := other()
		if l, err := o.ConnectLink(link, now); err != nil || l.Owner != "alice" || !l.Expires.Equal(now.Add(time.Minute)) {
			t.Fatalf("the link from another replica: %+v, %v", l, err)
		}
		if s, err := o.ConnectSession(cookie, now); err != nil || s.Link != link || s.Owner != "alice" || s.SigningIn {
			t.Fatalf("the session from another replica: %+v, %v", s, err)
		}
		_, err := c.ConnectLink(ConnectKeyOf("link-id2"), now)
		wantNotFound(t, err, "a guessed link")

		// Several replicas spend the link at once: one gets it.
		var wg sync.WaitGroup
		var mu sync.Mutex
		won := 0
		for i := range 6 {
			store := c
			if i%2 == 1 {
				store = o
			}
			wg.Go(func() {
				l, err := store.SpendConnectLink(link, now)
				switch {
				case err == nil && l.Owner == "alice":
					mu.Lock()
					won++
					mu.Unlock()
				case !errors.Is(err, ErrNotFound):
					t.Errorf("spending: %+v, %v", l, err)
				}
			})
		}
		wg.Wait()
		if won != 1 {
			t.Fatalf("the link was spent %d times", won)
		}
		_, err = o.ConnectLink(link, now)
		wantNotFound(t, err, "a spent link")
		_, err = c.ConnectSession(cookie, now)
		wantNotFound(t, err, "a session of a spent link")
		wantNotFound(t, c.AddConnectSession(cookie, ConnectSession{Link: link, Expires: now.Add(time.Minute)}, now), "a session of a spent link")
	})
}

func TestConnectExpiryAndDeletion(t *testing.T) {
	forEachConnectStore(t, 100, func(t *testing.T, c ConnectStore, _ func() ConnectStore) {
		now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		link, cookie, signIn := ConnectKeyOf("l"), ConnectKeyOf("c"), ConnectKeyOf("s")
		if err := c.AddConnectLink(link, ConnectLink{Owner: "bob", Expires: now.Add(10 * time.Minute)}, now); err != nil {
			t.Fatal(err)
		}
		for k, s := range map[ConnectKey]ConnectSession{
			cookie: {Link: link, Owner: "bob", Expires: now.Add(time.Minute)},
			signIn: {Link: link, SigningIn: true, Expires: now.Add(5 * time.Minute)},
		} {
			if err := c.AddConnectSession(k, s, now); err != nil {
				t.Fatal(err)
			}
		}
		if s, err := c.ConnectSession(signIn, now); err != nil || !s.SigningIn || s.Owner != "" {
			t.Fatalf("the sign-in session: %+v, %v", s, err)
		}
		if err := c.DeleteConnectSession(signIn); err != nil {
			t.Fatal(err)
		}
		_, err := c.ConnectSession(signIn, now)
		wantNotFound(t, err, "a deleted session")
		if err := c.DeleteConnectSession(signIn); err != nil {
			t.Fatalf("deleting it again: %v", err)
		}
		later := now.Add(time.Minute)
		_, err = c.ConnectSession(cookie, later)
		wantNotFound(t, err, "an expired session")
		if _, err := c.ConnectLink(link, later); err != nil {
			t.Fatalf("the link before it expires: %v", err)
		}
		gone := now.Add(10 * time.Minute)
		_, err = c.ConnectLink(link, gone)
		wantNotFound(t, err, "an expired link")
		_, err = c.SpendConnectLink(link, gone)
		wantNotFound(t, err, "spending an expired link")
	})
}

// A store holds a bounded number of links and of sessions: a flood of calls without a key, or of visits to one
// link, cannot grow it without end; expired ones make room again.
func TestConnectStoresAreBounded(t *testing.T) {
	forEachConnectStore(t, 3, func(t *testing.T, c ConnectStore, other func() ConnectStore) {
		now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		keys := []string{"a", "b", "c", "d"}
		for i, k := range keys {
			err := c.AddConnectLink(ConnectKeyOf(k), ConnectLink{Owner: "alice", Expires: now.Add(time.Duration(i+1) * time.Minute)}, now)
			if i < 3 && err != nil {
				t.Fatal(err)
			}
			if i == 3 && !errors.Is(err, ErrTooManyConnects) {
				t.Fatalf("a fourth link with a limit of 3: %v", err)
			}
		}
		link := ConnectKeyOf("c")
		for i := range 4 {
			err := other().AddConnectSession(ConnectKeyOf(strings.Repeat("s", i+1)), ConnectSession{Link: link, Expires: now.Add(time.Minute)}, now)
			if i < 3 && err != nil {
				t.Fatal(err)
			}
			if i == 3 && !errors.Is(err, ErrTooManyConnects) {
				t.Fatalf("a fourth session with a limit of 3: %v", err)
			}
		}
		// Once the first link and the sessions expired, there is room again.
		later := now.Add(time.Minute)
		if err := c.AddConnectLink(ConnectKeyOf("d"), ConnectLink{Owner: "alice", Expires: later.Add(time.Minute)}, later); err != nil {
			t.Fatalf("a link once one expired: %v", err)
		}
		if err := c.AddConnectSession(ConnectKeyOf("t"), ConnectSession{Link: link, Expires: later.Add(time.Minute)}, later); err != nil {
			t.Fatalf("a session once the others expired: %v", err)
		}
	})
}

// The database keeps the hashes of link IDs and cookies, never the values that open the page.
func TestPostgresConnectKeepsNoLinkOrCookie(t *testing.T) {
	s, _ := pgKind().newTestStore(t)
	c := s.Store.(*Postgres).Connects(10)
	now := time.Now()
	const id, cookie = "Lnk7s3cr3tLinkIdentifier", "C00kie5ecretValueOfTheBrowser"
	if err := c.AddConnectLink(ConnectKeyOf(id), ConnectLink{Owner: "alice", Expires: now.Add(time.Minute)}, now); err != nil {
		t.Fatal(err)
	}
	if err := c.AddConnectSession(ConnectKeyOf(cookie), ConnectSession{Link: ConnectKeyOf(id), Owner: "alice", Expires: now.Add(time.Minute)}, now); err != nil {
		t.Fatal(err)
	}
	dump := queryValue[string](t, s.where, `SELECT (SELECT string_agg(encode(id_hash, 'escape') || owner, ',') FROM e2b_mcp_connect_links) ||
		(SELECT string_agg(encode(id_hash, 'escape') || encode(link_hash, 'escape') || owner, ',') FROM e2b_mcp_connect_sessions)`)
	for _, secret := range []string{id, cookie} {
		if strings.Contains(dump, secret) {
			t.Fatalf("the database holds %q: %s", secret, dump)
		}
	}
	if !strings.Contains(dump, "alice") {
		t.Fatalf("the dump shows no rows: %s", dump)
	}
}
