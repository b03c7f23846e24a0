package credentials

import (
	"context"
	"errors"
	"sync"
	"time"
)

// keyringAnswerBound bounds the wait for the keyring's answers to a check of a remembered entry.
const keyringAnswerBound = 30 * time.Second

// KeyringCache is the OS keyring (Keyring) with each secret it reads kept in memory, for a server that needs an
// owner's key on every call. Before it serves a remembered secret it asks the keyring whether the entry is still
// the one it read: on Linux, whether the Secret Service has announced no change since the read, and the item is
// still there, unlocked, in the collection go-keyring uses: one D-Bus round trip in place of the seven of a read.
// An entry that is not there (the credentials of an owner who added none, read at every create) is remembered as
// absent while no change was announced and a search of the unlocked collection still finds none, one round trip
// in place of the five of a read that finds nothing. So a login or a logout in another process still takes
// effect on the next read, and a keyring that is locked or gone gives Keyring's error, never a remembered secret
// or absence. Where the keyring cannot vouch for an entry (macOS, Windows, no Secret Service, go-keyring's mock
// in tests), every read goes to the keyring, as Keyring's do.
type KeyringCache struct {
	Keyring
	watch entryWatcher
	// read reads a secret from the keyring; Keyring.Secret but in tests that count the reads.
	read func(account string) (string, error)

	mu         sync.Mutex
	remembered map[string]rememberedSecret
}

type rememberedSecret struct {
	secret string
	err    error // the read's ErrNotFound, for an entry remembered as absent
	stamp  entryStamp
}

// entryWatcher tells whether a keyring entry changed, without reading its secret. Its answers come within ctx.
type entryWatcher interface {
	// stamp finds account's entry of service and returns its stamp, an absence stamp when there is none, or an
	// error when the keyring cannot vouch for the entry: it is locked, no keyring answers.
	stamp(ctx context.Context, service, account string) (entryStamp, error)
	// unchanged reports whether the entry stamped s is still there (or, for an absence, still not there),
	// unlocked, and has not changed since.
	unchanged(ctx context.Context, service, account string, s entryStamp) bool
}

// NewKeyringCache returns k with what it reads kept in memory, watched as the platform's keyring allows.
func NewKeyringCache(k Keyring) *KeyringCache {
	c := &KeyringCache{Keyring: k, watch: platformWatcher(), remembered: map[string]rememberedSecret{}}
	c.read = c.Keyring.Secret
	return c
}

// Secret returns account's secret: the remembered one while the keyring says its entry is unchanged, or else
// what the keyring holds now. A remembered secret whose entry changed, went or cannot be checked is forgotten
// before the keyring is read again, so a failing read never leaves it behind.
func (c *KeyringCache) Secret(account string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), keyringAnswerBound)
	defer cancel()
	service := c.service()
	c.mu.Lock()
	r, ok := c.remembered[account]
	c.mu.Unlock()
	if ok {
		if c.watch.unchanged(ctx, service, account, r.stamp) {
			return r.secret, r.err
		}
		c.forget(account)
	}

	// The stamp is taken before the secret is read, so a change between the two leaves a stamp that no longer
	// matches. An absence is remembered only when both found none: an entry written between them is found by the
	// read.
	stamp, stampErr := c.watch.stamp(ctx, service, account)
	secret, err := c.read(account)
	if err != nil {
		if stampErr == nil && stamp.absent && errors.Is(err, ErrNotFound) {
			c.mu.Lock()
			c.remembered[account] = rememberedSecret{err: err, stamp: stamp}
			c.mu.Unlock()
		}
		return "", err
	}
	if stampErr == nil && !stamp.absent {
		c.mu.Lock()
		c.remembered[account] = rememberedSecret{secret: secret, stamp: stamp}
		c.mu.Unlock()
	}
	return secret, nil
}

// SetSecret writes account's entry in the OS keyring and forgets what was remembered of it.
func (c *KeyringCache) SetSecret(account, secret string) error {
	c.forget(account)
	return c.Keyring.SetSecret(account, secret)
}

// DeleteSecret removes account's entry from the OS keyring and forgets what was remembered of it.
func (c *KeyringCache) DeleteSecret(account string) error {
	c.forget(account)
	return c.Keyring.DeleteSecret(account)
}

func (c *KeyringCache) forget(account string) {
	c.mu.Lock()
	delete(c.remembered, account)
	c.mu.Unlock()
}
