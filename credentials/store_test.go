package credentials

import (
	"errors"
	"strings"
	"testing"
)

// followsAnotherWriter checks the promise every SecretStore keeps to a server: a login, a re-login or a logout
// made through another opening of the same store (another process: `e2b-mcp auth login` in another terminal, or
// another host) takes effect at reader's next read, also when reader has just read the entry. afterWrite runs
// after each of writer's changes, to make it harder to see.
func followsAnotherWriter(t *testing.T, reader, writer SecretStore, afterWrite func()) {
	t.Helper()
	// Keys of one length: a change does not change the size of what holds them.
	key := func(n int) string { return "e2b_" + strings.Repeat(string(rune('0'+n)), 40) }
	wants := func(want, when string) {
		t.Helper()
		for range 2 { // the second read is the one a store that remembers may answer from memory
			if got, err := APIKey(reader, "alice"); err != nil || got != want {
				t.Fatalf("%s: APIKey = %q, %v; want the key ending in %s", when, LastFour(got), err, LastFour(want))
			}
		}
	}
	set := func(n int) {
		t.Helper()
		if err := SetAPIKey(writer, "alice", key(n)); err != nil {
			t.Fatal(err)
		}
		afterWrite()
	}
	set(1)
	wants(key(1), "after a login elsewhere")
	set(2)
	wants(key(2), "after a second login elsewhere")
	if err := DeleteAPIKey(writer, "alice"); err != nil {
		t.Fatal(err)
	}
	afterWrite()
	for range 2 {
		if got, err := APIKey(reader, "alice"); !errors.Is(err, ErrNoKey) {
			t.Fatalf("after a logout elsewhere: APIKey = %q, %v; want ErrNoKey", LastFour(got), err)
		}
	}
	set(3)
	wants(key(3), "after a login elsewhere that follows the logout")
}
