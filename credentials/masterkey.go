package credentials

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// MasterKeySize is the length of a master key: 32 bytes.
const MasterKeySize = 32

// maxMasterKeyFileBytes bounds the master key file: the key in raw, hex or base64 form, and some whitespace.
const maxMasterKeyFileBytes = 4096

const (
	hkdfInfo        = "e2b-mcp encrypted key store v1"
	fingerprintInfo = "e2b-mcp master key fingerprint"
)

// MasterKey is a master key read from its file: the AEAD (AES-256-GCM under a key derived from it with HKDF)
// that seals secrets under it, and a fingerprint that tells two master keys apart. The key itself is not kept.
type MasterKey struct {
	file        string
	aead        cipher.AEAD
	fingerprint []byte
}

// LoadMasterKey reads the master key in file, which must be private (no access for group or others) and hold 32
// bytes: raw, as 64 hex digits, or in base64. Every error names the file and none contains its content.
func LoadMasterKey(file string) (*MasterKey, error) {
	file, err := filepath.Abs(file)
	if err != nil {
		return nil, fmt.Errorf("master key file: %w", err)
	}
	key, err := readMasterKey(file)
	if err != nil {
		return nil, err
	}
	defer clear(key)
	sealingKey, err := hkdf.Key(sha256.New, key, nil, hkdfInfo, 32)
	if err != nil {
		return nil, fmt.Errorf("master key file %s: %w", file, err)
	}
	defer clear(sealingKey)
	fingerprint, err := hkdf.Key(sha256.New, key, nil, fingerprintInfo, 32)
	if err != nil {
		return nil, fmt.Errorf("master key file %s: %w", file, err)
	}
	block, err := aes.NewCipher(sealingKey)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &MasterKey{file: file, aead: aead, fingerprint: fingerprint}, nil
}

// File is the master key's file (an absolute path).
func (k *MasterKey) File() string { return k.file }

// Same reports whether k and o are the same key, whatever their files.
func (k *MasterKey) Same(o *MasterKey) bool {
	return subtle.ConstantTimeCompare(k.fingerprint, o.fingerprint) == 1
}

// readMasterKey reads and decodes a master key file. The error never contains the file's content.
func readMasterKey(path string) ([]byte, error) {
	data, err := readPrivateFile(path, "master key file", maxMasterKeyFileBytes, ErrMasterKey)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: the master key file %s does not exist (make one with `umask 077; openssl rand "+
			"-hex 32 > %s`, and keep it out of the state directory and its backups)", ErrMasterKey, path, path)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMasterKey, err)
	}
	defer clear(data)
	if len(data) == MasterKeySize {
		return bytes.Clone(data), nil
	}
	text := strings.TrimSpace(string(data))
	if key, err := hex.DecodeString(text); err == nil && len(key) == MasterKeySize {
		return key, nil
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding,
		base64.RawURLEncoding} {
		if key, err := enc.DecodeString(text); err == nil && len(key) == MasterKeySize {
			return key, nil
		}
	}
	return nil, fmt.Errorf("%w: the master key file %s does not hold a %d-byte key (raw, 64 hex digits or "+
		"base64); make one with `openssl rand -hex 32`", ErrMasterKey, path, MasterKeySize)
}
