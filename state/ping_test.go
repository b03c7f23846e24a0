package state

import (
	"context"
	"errors"
	"testing"
)

// Ping answers nil while the store can be used and ErrClosed once it is closed, in both stores.
func TestPing(t *testing.T) {
	forEachStore(t, func(t *testing.T, k storeKind) {
		s, _ := k.newTestStore(t)
		if err := s.Ping(context.Background()); err != nil {
			t.Fatalf("an open store: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := s.Ping(context.Background()); !errors.Is(err, ErrClosed) {
			t.Fatalf("a closed store: %v, want ErrClosed", err)
		}
	})
}
