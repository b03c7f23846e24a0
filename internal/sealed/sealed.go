// Package sealed is the one form of an AEAD-sealed value in e2b-mcp's files: a fresh random nonce followed by
// the ciphertext and its tag. The state store's envd tokens and the encrypted key store's secrets use it.
package sealed

import (
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
)

// ErrTooShort means a sealed value is shorter than a nonce and a tag.
var ErrTooShort = errors.New("sealed value too short")

// Seal encrypts plaintext as nonce || ciphertext+tag, binding it to additional.
func Seal(aead cipher.AEAD, plaintext, additional []byte) ([]byte, error) {
	out := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plaintext)+aead.Overhead())
	if _, err := rand.Read(out); err != nil {
		return nil, fmt.Errorf("generating a nonce: %w", err)
	}
	return aead.Seal(out, out, plaintext, additional), nil
}

// Open decrypts what Seal made with the same key and additional data; any other input is an error.
func Open(aead cipher.AEAD, sealed, additional []byte) ([]byte, error) {
	if len(sealed) < aead.NonceSize()+aead.Overhead() {
		return nil, ErrTooShort
	}
	n := aead.NonceSize()
	return aead.Open(nil, sealed[:n], sealed[n:], additional)
}
