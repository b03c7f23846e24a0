package credentials

import (
	"errors"
	"strings"
	"testing"

	"github.com/zalando/go-keyring"
)

const testKey = "e2b_0123456789abcdef0123456789abcdef01234567"

func TestAPIKeyRoundTrip(t *testing.T) {
	keyring.MockInit()
	k := Keyring{}

	if _, err := APIKey(k, "alice"); !errors.Is(err, ErrNoKey) {
		t.Fatalf("APIKey before login: got %v, want ErrNoKey", err)
	}
	if err := SetAPIKey(k, "alice", testKey); err != nil {
		t.Fatalf("SetAPIKey: %v", err)
	}
	got, err := APIKey(k, "alice")
	if err != nil || got != testKey {
		t.Fatalf("APIKey = %q, %v; want the stored key", got, err)
	}
	if _, err := APIKey(k, "bob"); !errors.Is(err, ErrNoKey) {
		t.Fatalf("another owner's key: got %v, want ErrNoKey", err)
	}
	if v, err := keyring.Get(Service, "alice"); err != nil || v != testKey {
		t.Fatalf("keyring entry service %q account alice = %q, %v", Service, v, err)
	}
	if err := DeleteAPIKey(k, "alice"); err != nil {
		t.Fatalf("DeleteAPIKey: %v", err)
	}
	if _, err := APIKey(k, "alice"); !errors.Is(err, ErrNoKey) {
		t.Fatalf("APIKey after logout: got %v, want ErrNoKey", err)
	}
	if err := DeleteAPIKey(k, "alice"); !errors.Is(err, ErrNoKey) {
		t.Fatalf("second DeleteAPIKey: got %v, want ErrNoKey", err)
	}
}

func TestSetAPIKeyRefusesBadInput(t *testing.T) {
	keyring.MockInit()
	k := Keyring{Service: "e2b-mcp-test"}
	for _, tc := range []struct {
		name, owner, key string
		want             error
	}{
		{"uppercase hex", "alice", "e2b_ABCDEF", ErrKeyForm},
		{"no prefix", "alice", "0123456789abcdef", ErrKeyForm},
		{"prefix only", "alice", "e2b_", ErrKeyForm},
		{"trailing newline", "alice", testKey + "\n", ErrKeyForm},
		{"empty owner", "", testKey, ErrOwnerName},
		{"reserved owner", DataKeyAccount, testKey, ErrOwnerName},
		{"control character", "al\x00ice", testKey, ErrOwnerName},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := SetAPIKey(k, tc.owner, tc.key)
			if !errors.Is(err, tc.want) {
				t.Fatalf("SetAPIKey: got %v, want %v", err, tc.want)
			}
			if len(tc.key) > 4 && strings.Contains(err.Error(), strings.TrimSpace(tc.key)) {
				t.Fatalf("error %q repeats the key", err)
			}
		})
	}
}

func TestStateKeysUsesReservedAccount(t *testing.T) {
	keyring.MockInit()
	k := Keyring{}
	key1, err := StateKeys(k).DataKey()
	if err != nil {
		t.Fatal(err)
	}
	key2, err := StateKeys(k).DataKey()
	if err != nil {
		t.Fatal(err)
	}
	if len(key1) != 32 || string(key1) != string(key2) {
		t.Fatalf("data key not stable: %x vs %x", key1, key2)
	}
	if _, err := keyring.Get(Service, DataKeyAccount); err != nil {
		t.Fatalf("data key not under account %q: %v", DataKeyAccount, err)
	}
}

func TestLastFour(t *testing.T) {
	if got := LastFour(testKey); got != "4567" {
		t.Fatalf("LastFour = %q", got)
	}
	if got := LastFour("e2b_abc"); got != "" {
		t.Fatalf("LastFour of a short secret = %q, want nothing", got)
	}
}
