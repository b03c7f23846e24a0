package state

import (
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

// The connect page's links and sessions, against the memory of a server alone and the database of replicas.
func forEachConnectStore(t *testing.T, limits ConnectLimits, test func(t *testing.T, c ConnectStore, other func() ConnectStore)) {
	t.Run("memory", func(t *testing.T) {
		m := NewMemoryConnects(limits)
		test(t, m, func() ConnectStore { return m })
	})
	t.Run("postgres", func(t *testing.T) {
		k := pgKind()
		s, _ := k.newTestStore(t)
		test(t, s.Store.(*Postgres).Connects(limits), func() ConnectStore {
			return k.reopen(t, s, Options{}).Store.(*Postgres).Connects(limits)
		})
	})
}

// roomy are limits the tests of other things never reach.
var roomy = ConnectLimits{Links: 100, LinksPerOwner: 10, SessionsPerLink: 10}

func wantNotFound(t *testing.T, err error, what string) {
	t.Helper()
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("%s: %v, want ErrNotFound", what, err)
	}
}

func TestConnectLinkIsSpentOnceEverywhere(t *testing.T) {
	forEachConnectStore(t, roomy, func(t *testing.T, c ConnectStore, other func() ConnectStore) {
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
		waitfor.Return(t, time.Minute, "the concurrent spends of one link", wg.Wait)
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
	forEachConnectStore(t, roomy, func(t *testing.T, c ConnectStore, _ func() ConnectStore) {
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

// A store holds a bounded number of links: an owner past their bound, or a script opening one link again and
// again, drops their own oldest, never another owner's; only many owners at once fill the store, and expired
// links make room again.
func TestConnectStoresAreBounded(t *testing.T) {
	forEachConnectStore(t, ConnectLimits{Links: 5, LinksPerOwner: 2, SessionsPerLink: 3}, func(t *testing.T, c ConnectStore, other func() ConnectStore) {
		now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		link := func(owner string, i int) ConnectKey { return ConnectKeyOf(owner + strconv.Itoa(i)) }
		addLink := func(s ConnectStore, owner string, i int) error {
			return s.AddConnectLink(link(owner, i), ConnectLink{Owner: owner, Expires: now.Add(time.Duration(i+1) * time.Minute)}, now)
		}
		if err := addLink(c, "bob", 0); err != nil {
			t.Fatal(err)
		}
		// Alice asks for a hundred links: she keeps her last two, bob his.
		for i := range 100 {
			if err := addLink(other(), "alice", i); err != nil {
				t.Fatalf("alice's link %d: %v", i, err)
			}
		}
		for i := range 98 {
			_, err := c.ConnectLink(link("alice", i), now)
			wantNotFound(t, err, "one of alice's older links")
		}
		for _, k := range []ConnectKey{link("alice", 98), link("alice", 99), link("bob", 0)} {
			if _, err := c.ConnectLink(k, now); err != nil {
				t.Fatalf("a link within the bounds: %v", err)
			}
		}
		if err := addLink(c, "bob", 1); err != nil {
			t.Fatalf("bob's second link: %v", err)
		}
		if err := addLink(c, "carol", 0); err != nil {
			t.Fatalf("carol's link: %v", err)
		}
		if err := addLink(c, "dave", 0); !errors.Is(err, ErrTooManyConnects) {
			t.Fatalf("a sixth link with a limit of 5: %v", err)
		}
		// Once bob's first link and carol's expired, there is room again.
		later := now.Add(time.Minute)
		if err := other().AddConnectLink(link("dave", 0), ConnectLink{Owner: "dave", Expires: later.Add(time.Minute)}, later); err != nil {
			t.Fatalf("a link once some expired: %v", err)
		}
	})
}

// A link holds a few sessions: a script opening it again and again drops the oldest of them, never the
// session of a browser that proved to be the owner while there are others; expired ones make room first.
func TestConnectSessionsPerLinkAreBounded(t *testing.T) {
	forEachConnectStore(t, ConnectLimits{Links: 5, LinksPerOwner: 2, SessionsPerLink: 3}, func(t *testing.T, c ConnectStore, other func() ConnectStore) {
		now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		link, others := ConnectKeyOf("link"), ConnectKeyOf("other link")
		for _, k := range []ConnectKey{link, others} {
			if err := c.AddConnectLink(k, ConnectLink{Owner: "alice", Expires: now.Add(time.Hour)}, now); err != nil {
				t.Fatal(err)
			}
		}
		addSession := func(s ConnectStore, name string, l ConnectKey, owner string, at time.Time) {
			t.Helper()
			if err := s.AddConnectSession(ConnectKeyOf(name), ConnectSession{Link: l, Owner: owner, Expires: at.Add(15 * time.Minute)}, at); err != nil {
				t.Fatalf("session %s: %v", name, err)
			}
		}
		addSession(c, "other link's", others, "", now)
		addSession(c, "signed in", link, "alice", now)
		for i := range 50 {
			addSession(other(), "script"+strconv.Itoa(i), link, "", now.Add(time.Duration(i)*time.Second))
		}
		kept := []string{"other link's", "signed in", "script48", "script49"}
		for _, name := range kept {
			if _, err := c.ConnectSession(ConnectKeyOf(name), now.Add(time.Minute)); err != nil {
				t.Errorf("session %s after the script: %v", name, err)
			}
		}
		for i := range 48 {
			_, err := c.ConnectSession(ConnectKeyOf("script"+strconv.Itoa(i)), now.Add(time.Minute))
			wantNotFound(t, err, "an older session of the script")
		}
		// Of proven sessions alone, the oldest goes.
		addSession(c, "signed in again", link, "alice", now.Add(time.Minute))
		addSession(c, "and again", link, "alice", now.Add(time.Minute))
		addSession(c, "and once more", link, "alice", now.Add(time.Minute))
		_, err := c.ConnectSession(ConnectKeyOf("signed in"), now.Add(time.Minute))
		wantNotFound(t, err, "the oldest proven session past the bound")
		// Expired sessions make room before any live one goes, proven or not.
		bobs := ConnectKeyOf("bob's link")
		if err := c.AddConnectLink(bobs, ConnectLink{Owner: "bob", Expires: now.Add(time.Hour)}, now); err != nil {
			t.Fatal(err)
		}
		for name, expires := range map[string]time.Duration{"expiring": time.Minute, "live 1": time.Hour, "live 2": time.Hour} {
			if err := c.AddConnectSession(ConnectKeyOf(name), ConnectSession{Link: bobs, Owner: "bob", Expires: now.Add(expires)}, now); err != nil {
				t.Fatal(err)
			}
		}
		later := now.Add(2 * time.Minute)
		addSession(other(), "new", bobs, "", later)
		for _, name := range []string{"live 1", "live 2", "new"} {
			if _, err := c.ConnectSession(ConnectKeyOf(name), later); err != nil {
				t.Errorf("session %s: %v", name, err)
			}
		}
	})
}

// The database keeps the hashes of link IDs and cookies, never the values that open the page.
func TestPostgresConnectKeepsNoLinkOrCookie(t *testing.T) {
	s, _ := pgKind().newTestStore(t)
	c := s.Store.(*Postgres).Connects(roomy)
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
