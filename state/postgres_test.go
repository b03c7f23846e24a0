package state

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/e2b-mcp/e2b-mcp/internal/pgtest"
	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

// The PostgreSQL store's own concerns: what lies in the database, damaged or foreign databases, several
// processes opening one database, and its password.

func pgKind() storeKind { return storeKind{name: "postgres", fresh: freshDatabase} }

// queryValue reads one value straight from the database, behind the store's back.
func queryValue[T any](t *testing.T, dbURL, sql string, args ...any) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var v T
	if err := conn.QueryRow(ctx, sql, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}

func TestPostgresTokensSealedAndBoundToRecord(t *testing.T) {
	s, clock := pgKind().newTestStore(t)
	for _, id := range []string{"sbx1", "sbx2"} {
		if err := s.PutSandbox(sampleSandbox("alice", id, "main", clock.Now())); err != nil {
			t.Fatal(err)
		}
	}
	dump := queryValue[string](t, s.where, "SELECT string_agg(record::text, '') FROM e2b_mcp_sandboxes")
	if strings.Contains(dump, "envd-token-") {
		t.Fatalf("a plaintext envd token is in the database: %s", dump)
	}
	// An attacker with write access to the database moves sbx1's sealed token onto sbx2's record.
	if err := pgServer.Exec(s.where, `UPDATE e2b_mcp_sandboxes SET record = (SELECT record FROM e2b_mcp_sandboxes
		WHERE id = 'sbx1') WHERE id = 'sbx2'`); err != nil {
		t.Fatal(err)
	}
	_, err := s.Sandbox("alice", "sbx2")
	wantErr(t, err, "does not decrypt")
	if !errors.Is(err, ErrUnusable) {
		t.Fatalf("moved ciphertext: %v, want ErrUnusable", err)
	}
	if got, err := s.Sandbox("alice", "sbx1"); err != nil || got.AccessToken != "envd-token-sbx1" {
		t.Fatalf("the untouched record: %+v, %v", got, err)
	}
}

func TestPostgresWrongDataKey(t *testing.T) {
	k := pgKind()
	s, clock := k.newTestStore(t)
	if err := s.PutSandbox(sampleSandbox("alice", "sbx1", "main", clock.Now())); err != nil {
		t.Fatal(err)
	}
	wrong := k.reopen(t, s, Options{Keys: StaticKeySource(testKey(2))})
	_, err := wrong.Sandbox("alice", "sbx1")
	wantErr(t, err, "data key", "not the one")
	err = wrong.PutSandbox(sampleSandbox("alice", "sbx2", "main", clock.Now()))
	wantErr(t, err, "data key", "not the one")
	if got, err := s.Sandbox("alice", "sbx1"); err != nil || got.AccessToken != "envd-token-sbx1" {
		t.Fatalf("after a wrong key was tried: %+v, %v", got, err)
	}
}

func TestPostgresForeignAndFutureDatabasesRefusedAndUntouched(t *testing.T) {
	foreign := freshDatabase(t)
	if err := pgServer.Exec(foreign, `CREATE TABLE e2b_mcp_meta (key text PRIMARY KEY, value bytea NOT NULL);
		INSERT INTO e2b_mcp_meta VALUES ('application', 'something else')`); err != nil {
		t.Fatal(err)
	}
	_, err := OpenPostgres(foreign, Options{Keys: StaticKeySource(testKey(1))})
	wantErr(t, err, "not e2b-mcp's", "left untouched")
	if !errors.Is(err, ErrUnusable) {
		t.Fatalf("foreign database: %v, want ErrUnusable", err)
	}
	if n := queryValue[int64](t, foreign, "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'e2b_mcp_%'"); n != 1 {
		t.Fatalf("the foreign database has %d e2b_mcp tables now, want its 1", n)
	}

	k := pgKind()
	s, clock := k.newTestStore(t)
	if err := s.PutSandbox(sampleSandbox("alice", "sbx1", "main", clock.Now())); err != nil {
		t.Fatal(err)
	}
	// A newer e2b-mcp migrates the database while this one runs: this one stops writing, and a fresh open
	// refuses it.
	future := strconv.Itoa(len(pgMigrations()) + 2)
	if err := pgServer.Exec(s.where, "UPDATE e2b_mcp_meta SET value = '"+future+"' WHERE key = 'schema'"); err != nil {
		t.Fatal(err)
	}
	before := queryValue[string](t, s.where, "SELECT record::text FROM e2b_mcp_sandboxes")
	err = s.PutSandbox(sampleSandbox("alice", "sbx1", "other", clock.Now()))
	wantErr(t, err, "schema version", "reopen")
	_, err = OpenPostgres(s.where, Options{Keys: StaticKeySource(testKey(1))})
	wantErr(t, err, fmt.Sprintf("schema version %s, newer than the %d", future, len(pgMigrations())+1), "upgrade e2b-mcp")
	if after := queryValue[string](t, s.where, "SELECT record::text FROM e2b_mcp_sandboxes"); after != before {
		t.Fatalf("a refused database was written to:\n%s\n%s", before, after)
	}
}

// Replicas starting together on an empty database create its tables once, and agree on one data key check.
func TestPostgresConcurrentOpensCreateTheTablesOnce(t *testing.T) {
	where := freshDatabase(t)
	const n = 6
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			s, err := OpenPostgres(where, Options{Keys: StaticKeySource(testKey(1))})
			if err != nil {
				errs <- err
				return
			}
			defer s.Close()
			r := sampleSandbox("alice", "sbx"+string(rune('a'+i)), "main", time.Now())
			if err := s.PutSandbox(r); err != nil {
				errs <- err
			}
		})
	}
	waitfor.Return(t, time.Minute, "the concurrent writers", wg.Wait)
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	s := pgKind().open(t, where, Options{})
	all, err := s.AllSandboxes()
	if err != nil || len(all) != n {
		t.Fatalf("AllSandboxes = %d records, %v; want %d", len(all), err, n)
	}
}

func TestPostgresPasswordNeverShown(t *testing.T) {
	k := pgKind()
	s, _ := k.newTestStore(t)
	if strings.Contains(s.Location(), pgServer.Password()) || !strings.Contains(s.Location(), pgtest.User+"@127.0.0.1") {
		t.Fatalf("Location = %q shows the password, or not the user and host", s.Location())
	}
	for _, bad := range []string{
		strings.Replace(s.where, "127.0.0.1:", "127.0.0.1:1", 1), // nothing listens there (a port above 65535 or a closed one)
		s.where + "?sslmode=bogus&password=" + pgServer.Password(),
		strings.Replace(s.where, "/test_", "/no_such_database_", 1),
	} {
		_, err := OpenPostgres(bad, Options{Keys: StaticKeySource(testKey(1)), LockTimeout: 5 * time.Second})
		if err == nil {
			t.Fatalf("opening %s worked", URLWithoutPassword(bad))
		}
		if strings.Contains(err.Error(), pgServer.Password()) {
			t.Fatalf("the error shows the password: %v", err)
		}
	}
}

// A row held by a stuck process makes an operation give up after the lock timeout with ErrBusy.
func TestPostgresBusy(t *testing.T) {
	k := pgKind()
	s, clock := k.newTestStore(t)
	if err := s.PutSandbox(sampleSandbox("alice", "sbx1", "main", clock.Now())); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.where)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT 1 FROM e2b_mcp_sandboxes WHERE id = 'sbx1' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	short := k.reopen(t, s, Options{LockTimeout: 3 * time.Second})
	_, err = short.UpdateSandbox("alice", "sbx1", func(r *SandboxRecord) error { r.Steps++; return nil })
	if !errors.Is(err, ErrBusy) {
		t.Fatalf("update of a locked row: %v, want ErrBusy", err)
	}
	wantErr(t, err, short.Location(), "is busy")
	if _, err := short.Sandbox("alice", "sbx1"); err != nil {
		t.Fatalf("reads do not wait for the writer's lock: %v", err)
	}
	_ = tx.Rollback(ctx)
	if got, err := short.UpdateSandbox("alice", "sbx1", func(r *SandboxRecord) error { r.Steps++; return nil }); err != nil || got.Steps != 4 {
		t.Fatalf("after the lock is released: %+v, %v", got, err)
	}
}

func TestPostgresClosed(t *testing.T) {
	s, _ := pgKind().newTestStore(t)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Sessions(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Sessions after Close: %v, want ErrClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// Processes replacing a shared document one after another lose none of each other's changes.
func TestPostgresDocumentUpdatesFollowOneAnother(t *testing.T) {
	k := pgKind()
	s, _ := k.newTestStore(t)
	other := k.reopen(t, s, Options{})
	docs := []*PostgresDocument{s.Store.(*Postgres).Document("counter"), other.Store.(*Postgres).Document("counter")}
	if err := docs[0].Update(false, func(doc []byte) ([]byte, error) {
		if doc != nil {
			t.Errorf("a new document reads %q, want nil", doc)
		}
		return []byte("ignored: a read never writes"), nil
	}); err != nil {
		t.Fatal(err)
	}
	const workers, each = 6, 10
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for range each {
				err := docs[w%2].Update(true, func(doc []byte) ([]byte, error) {
					n, _ := strconv.Atoi(string(doc))
					return []byte(strconv.Itoa(n + 1)), nil
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	waitfor.Return(t, time.Minute, "the concurrent writers", wg.Wait)
	var got []byte
	if err := docs[1].Update(false, func(doc []byte) ([]byte, error) { got = doc; return nil, nil }); err != nil {
		t.Fatal(err)
	}
	if want := strconv.Itoa(workers * each); string(got) != want {
		t.Fatalf("counter = %q, want %s", got, want)
	}
	wantErr(t, docs[0].Update(true, func([]byte) ([]byte, error) { return nil, errors.New("no thanks") }), "no thanks")
}

// A database of each older schema version, made by an e2b-mcp of that version, is migrated in place to the
// current version by the first store of this version that opens it, its records kept; an older store still
// running then stops writing, and one started later refuses the database.
func TestPostgresMigratesOlderVersionsInPlace(t *testing.T) {
	current := len(pgMigrations()) + 1
	// laterTables are the tables each version adds to its predecessor's.
	laterTables := map[int]string{2: "'e2b_mcp_secrets', 'e2b_mcp_connect_links'", 3: "'e2b_mcp_ticket_nonces'", 4: "'e2b_mcp_tasks'", 5: "'e2b_mcp_reservations'", 6: "'e2b_mcp_usage'"}
	for old := 1; old < current; old++ {
		t.Run(fmt.Sprintf("version %d", old), func(t *testing.T) {
			where := freshDatabase(t)
			opts := Options{Keys: StaticKeySource(testKey(1))}
			older, err := openPostgres(where, opts, pgMigrations()[:old-1])
			if err != nil {
				t.Fatal(err)
			}
			defer older.Close()
			now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
			// Paused: this build counts a running sandbox's time in a table the older layouts lack.
			paused := sampleSandbox("alice", "sbx1", "main", now)
			paused.State = StatePaused
			if err := older.PutSandbox(paused); err != nil {
				t.Fatal(err)
			}
			if _, err := older.TouchSession("alice", "main", time.Hour); err != nil {
				t.Fatal(err)
			}
			for v := old + 1; v <= current; v++ {
				if n := queryValue[int64](t, where, "SELECT count(*) FROM pg_tables WHERE tablename IN ("+laterTables[v]+")"); n != 0 {
					t.Fatalf("a version %d database has %d of version %d's tables", old, n, v)
				}
			}

			migrated := pgKind().open(t, where, Options{})
			if got := queryValue[string](t, where, "SELECT convert_from(value, 'UTF8') FROM e2b_mcp_meta WHERE key = 'schema'"); got != strconv.Itoa(current) {
				t.Fatalf("schema version after the migration: %q", got)
			}
			if r, err := migrated.Sandbox("alice", "sbx1"); err != nil || r.AccessToken != "envd-token-sbx1" {
				t.Fatalf("the version %d record after the migration: %+v, %v", old, r, err)
			}
			if sessions, err := migrated.Sessions(); err != nil || len(sessions) != 1 || sessions[0].Name != "main" {
				t.Fatalf("the version %d sessions after the migration: %+v, %v", old, sessions, err)
			}
			pg := migrated.Store.(*Postgres)
			if _, err := pg.PutSealedSecret("alice", []byte("sealed"), false, anyCheck); err != nil {
				t.Fatalf("version 2's secrets: %v", err)
			}
			if err := pg.Connects(ConnectLimits{Links: 10, LinksPerOwner: 1, SessionsPerLink: 1}).AddConnectLink(ConnectKeyOf("l"), ConnectLink{Owner: "alice", Expires: time.Now().Add(time.Minute)}, time.Now()); err != nil {
				t.Fatalf("version 2's connect links: %v", err)
			}
			if spent, err := pg.TicketNonces().Spend("n", time.Now().Add(time.Minute), time.Now()); err != nil || !spent {
				t.Fatalf("version 3's ticket nonces: %v, %v", spent, err)
			}
			if err := pg.PutTask(sampleTask("alice", "task1", now)); err != nil {
				t.Fatalf("version 4's tasks: %v", err)
			}
			if _, err := pg.ReserveSandboxes("alice", SlotNew, 1, SandboxCaps{Running: 5}, time.Minute); err != nil {
				t.Fatalf("version 5's reservations: %v", err)
			}
			if err := pg.PutSandbox(sampleSandbox("alice", "sbx2", "main", now)); err != nil {
				t.Fatalf("version 6's usage: %v", err)
			}
			if days, err := pg.Usage("alice", now); err != nil || len(days) == 0 || days[0].Templates["base"].Created != 1 {
				t.Fatalf("version 6's usage: %+v, %v", days, err)
			}

			before := queryValue[string](t, where, "SELECT record::text FROM e2b_mcp_sandboxes")
			wantErr(t, older.PutSandbox(sampleSandbox("alice", "sbx1", "other", now)),
				fmt.Sprintf("schema version \"%d\"", current), fmt.Sprintf("opened at version %d", old))
			_, err = openPostgres(where, opts, pgMigrations()[:old-1])
			wantErr(t, err, fmt.Sprintf("schema version %d, newer than the %d", current, old), "upgrade e2b-mcp")
			if after := queryValue[string](t, where, "SELECT record::text FROM e2b_mcp_sandboxes"); after != before {
				t.Fatalf("a version %d store wrote to the version %d database:\n%s\n%s", old, current, before, after)
			}
			// Opening it again migrates nothing more.
			if _, err := OpenPostgres(where, opts); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Two handles on one database (two replicas) honour a ticket's nonce exactly once between them, even when they
// try at the same moment; an expired nonce is swept only well past its expiry.
func TestPostgresTicketNoncesSpentOnce(t *testing.T) {
	s, _ := pgKind().newTestStore(t)
	handles := []TicketNonces{s.Store.(*Postgres).TicketNonces(), pgKind().reopen(t, s, Options{}).Store.(*Postgres).TicketNonces()}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	expires := now.Add(10 * time.Minute)
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			spent, err := handles[i%2].Spend("nonce-1", expires, now)
			if err != nil {
				t.Error(err)
			}
			if spent {
				wins.Add(1)
			}
		}()
	}
	waitfor.Return(t, time.Minute, "the concurrent writers", wg.Wait)
	if wins.Load() != 1 {
		t.Fatalf("a nonce was spent %d times on two handles, want once", wins.Load())
	}
	if spent, err := handles[1].Spend("nonce-2", expires, now); err != nil || !spent {
		t.Fatalf("another nonce: %v, %v", spent, err)
	}
	// Past the nonce's expiry, but within the sweep's grace (a replica whose clock runs ahead), it stays used.
	if spent, err := handles[0].Spend("nonce-3", expires, expires.Add(time.Minute)); err != nil || !spent {
		t.Fatal(spent, err)
	}
	if spent, _ := handles[1].Spend("nonce-1", expires, now); spent {
		t.Fatal("a nonce was spent again after a sweep within its grace")
	}
	if _, err := handles[0].Spend("nonce-4", expires, expires.Add(ticketSweepGrace+time.Second)); err != nil {
		t.Fatal(err)
	}
	if n := queryValue[int64](t, s.where, "SELECT count(*) FROM e2b_mcp_ticket_nonces"); n != 1 {
		t.Fatalf("%d nonces left after a sweep past the grace, want the newest alone", n)
	}

	// The store closed: the nonce is not honoured, and the caller is told why.
	handles[0].(pgTicketNonces).s.Close()
	spent, err := handles[0].Spend("nonce-5", expires, now)
	if spent || !errors.Is(err, ErrClosed) {
		t.Fatalf("a closed store: %v, %v", spent, err)
	}
}

// anyCheck accepts every check value.
func anyCheck([]byte) error { return nil }

// The sealed secrets: kept as given, listed, removed; the first check value stays; each operation checks it in
// its own transaction; a reseal replaces all of them and the check value, or nothing.
func TestPostgresSealedSecrets(t *testing.T) {
	s, _ := pgKind().newTestStore(t)
	pg := s.Store.(*Postgres)
	if check, err := pg.SealedSecretsCheck([]byte("first")); err != nil || string(check) != "first" {
		t.Fatalf("the first check value: %q, %v", check, err)
	}
	other := pgKind().reopen(t, s, Options{}).Store.(*Postgres)
	if check, err := other.SealedSecretsCheck([]byte("second")); err != nil || string(check) != "first" {
		t.Fatalf("a second process's check value: %q, %v, want the first's", check, err)
	}
	_, err := pg.SealedSecret("alice", anyCheck)
	wantNotFound(t, err, "no secret yet")
	for _, a := range []string{"bob", "alice"} {
		if _, err := pg.PutSealedSecret(a, []byte("box of "+a), false, anyCheck); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := other.PutSealedSecret("alice", []byte("new box"), false, anyCheck); err != nil {
		t.Fatal(err)
	}
	if stored, err := other.PutSealedSecret("alice", []byte("not stored"), true, anyCheck); stored || err != nil {
		t.Fatalf("adding where there is a secret: %v, %v", stored, err)
	}
	if box, err := pg.SealedSecret("alice", anyCheck); err != nil || string(box) != "new box" {
		t.Fatalf("alice's secret: %q, %v", box, err)
	}
	if box, err := other.SealedSecret("bob", anyCheck); err != nil || string(box) != "box of bob" {
		t.Fatalf("bob's secret: %q, %v", box, err)
	}

	refuse := func(check []byte) error { return errors.New("not my key: " + string(check)) }
	if _, err := pg.SealedSecret("alice", refuse); err == nil || err.Error() != "not my key: first" {
		t.Fatalf("reading under a check that refuses: %v", err)
	}
	if _, err := pg.PutSealedSecret("carol", []byte("x"), false, refuse); err == nil {
		t.Fatal("writing under a check that refuses worked")
	}

	// A reseal that fails half-way changes nothing; one that succeeds changes every secret and the check value.
	upper := func(account string, box []byte) ([]byte, error) {
		if account == "bob" && string(box) == "box of bob" {
			return nil, errors.New("bob's does not open")
		}
		return []byte(strings.ToUpper(string(box))), nil
	}
	if _, err := pg.ResealSecrets(anyCheck, upper, []byte("next")); err == nil || !strings.Contains(err.Error(), "bob's") {
		t.Fatalf("a failing reseal: %v", err)
	}
	if box, _ := pg.SealedSecret("alice", anyCheck); string(box) != "new box" {
		t.Fatalf("after a failed reseal alice's secret is %q", box)
	}
	if _, err := pg.ResealSecrets(refuse, upper, []byte("next")); err == nil {
		t.Fatal("a reseal under a check that refuses worked")
	}
	if _, err := pg.PutSealedSecret("bob", []byte("bob again"), false, anyCheck); err != nil {
		t.Fatal(err)
	}
	if n, err := other.ResealSecrets(anyCheck, upper, []byte("next")); err != nil || n != 2 {
		t.Fatalf("the reseal: %d, %v", n, err)
	}
	if box, _ := pg.SealedSecret("bob", anyCheck); string(box) != "BOB AGAIN" {
		t.Fatalf("bob's secret after the reseal: %q", box)
	}
	if check, _ := pg.SealedSecretsCheck([]byte("ignored")); string(check) != "next" {
		t.Fatalf("the check value after the reseal: %q", check)
	}

	if err := pg.DeleteSealedSecret("bob"); err != nil {
		t.Fatal(err)
	}
	wantNotFound(t, pg.DeleteSealedSecret("bob"), "deleting twice")
	wantNotFound(t, pg.DeleteSealedSecret("bad\x00name"), "deleting a name the database cannot hold")
	_, err = pg.SealedSecret("bob", anyCheck)
	wantNotFound(t, err, "a deleted secret")
}
