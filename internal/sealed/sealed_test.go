package sealed

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"errors"
	"testing"
)

func newAEAD(t *testing.T, b byte) cipher.AEAD {
	t.Helper()
	block, err := aes.NewCipher(bytes.Repeat([]byte{b}, 32))
	if err != nil {
		t.Fatal(err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		t.Fatal(err)
	}
	return aead
}

func TestRoundTripAndRefusals(t *testing.T) {
	a := newAEAD(t, 1)
	s1, err := Seal(a, []byte("secret"), []byte("ad"))
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := Seal(a, []byte("secret"), []byte("ad"))
	if bytes.Equal(s1, s2) || bytes.Contains(s1, []byte("secret")) {
		t.Fatal("two seals of one value are equal, or a seal shows the plaintext")
	}
	if got, err := Open(a, s1, []byte("ad")); err != nil || string(got) != "secret" {
		t.Fatalf("Open = %q, %v", got, err)
	}
	if _, err := Open(a, s1, []byte("other ad")); err == nil {
		t.Fatal("opened under other additional data")
	}
	if _, err := Open(newAEAD(t, 2), s1, []byte("ad")); err == nil {
		t.Fatal("opened under another key")
	}
	flipped := bytes.Clone(s1)
	flipped[len(flipped)-1] ^= 1
	if _, err := Open(a, flipped, []byte("ad")); err == nil {
		t.Fatal("opened a tampered value")
	}
	if _, err := Open(a, s1[:10], []byte("ad")); !errors.Is(err, ErrTooShort) {
		t.Fatalf("short value: %v", err)
	}
}
