package credentials

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// keyringAnswerBound bounds a KeyringCache's wait for the keyring in each read or write. It leaves time for an
// unlock prompt on a desktop; a Secret Service that does not answer within it (hung, or showing a prompt nobody
// sees) gives an error, not a call that never ends.
const keyringAnswerBound = 30 * time.Second

var (
	// errNoAnswer is wrapped by the error of a read or write the keyring did not answer within the bound.
	errNoAnswer = errors.New("the keyring did not answer")
	// errLocked means the keyring holding an entry is locked, and was not unlocked when asked.
	errLocked = errors.New("the keyring is locked")
)

// KeyringCache is the OS keyring (Keyring) with each secret it reads kept in memory, for a server that needs an
// owner's key on every call. Before it serves a remembered secret it asks the keyring whether the entry is still
// the one it read: on Linux, whether the Secret Service has announced no change since the read, and the item is
// still there, unlocked, in the collection go-keyring uses: one D-Bus round trip in place of the seven of a read.
// An entry that is not there (the credentials of an owner who added none, read at every create) is remembered as
// absent while no change was announced and a search of the unlocked collection still finds none, one round trip
// in place of the five of a read that finds nothing. So a login or a logout in another process still takes
// effect on the next read, and a keyring that is locked or gone gives Keyring's error, never a remembered secret
// or absence. Where the keyring cannot vouch for an entry (macOS, Windows, no Secret Service), every read goes to
// the keyring, as Keyring's do. go-keyring's mock (tests) is not told apart: the Secret Service on the session bus,
// if there is one, vouches for what the mock holds, so a test that writes the mock other than through this cache
// reads it with a plain Keyring.
type KeyringCache struct {
	Keyring
	watch entryWatcher
	// read reads a secret from the keyring; Keyring.Secret but in tests that count the reads.
	read func(account string) (string, error)
	// answerBound is keyringAnswerBound but in tests.
	answerBound time.Duration

	mu         sync.Mutex
	remembered map[string]rememberedSecret
	reading    map[string]*keyringRead // the read of each account under way, if any
}

// keyringRead is one read of the keyring, which callers may wait for together.
type keyringRead struct {
	began  time.Time
	done   chan struct{} // closed when secret and err are set
	secret string
	err    error
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
	// unlock asks the keyring to unlock what stamp found locked (the stamp that came with errLocked), which may
	// show a prompt; it returns errLocked when the keyring stays locked.
	unlock(ctx context.Context, s entryStamp) error
}

// NewKeyringCache returns k with what it reads kept in memory, watched as the platform's keyring allows.
func NewKeyringCache(k Keyring) *KeyringCache {
	c := &KeyringCache{Keyring: k, watch: platformWatcher(), answerBound: keyringAnswerBound,
		remembered: map[string]rememberedSecret{}, reading: map[string]*keyringRead{}}
	c.read = c.Keyring.Secret
	return c
}

// Secret returns account's secret: the remembered one while the keyring says its entry is unchanged, or else
// what the keyring holds now. A remembered secret whose entry changed, went or cannot be checked is forgotten
// before the keyring is read again, so a failing read never leaves it behind.
func (c *KeyringCache) Secret(account string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.answerBound)
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
	if errors.Is(stampErr, errLocked) {
		// Only an unlocked keyring is read: go-keyring would ask for the unlock itself, and its way of asking
		// leaves goroutines behind (see the watcher's unlock).
		if err := c.watch.unlock(ctx, stamp); err != nil {
			return "", c.lockedError(ctx, fmt.Sprintf("to read the entry %q", account), err)
		}
		stamp, stampErr = c.watch.stamp(ctx, service, account)
	}
	secret, err := c.readWithin(ctx, account)
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

// readWithin reads account's secret from the keyring, waiting no longer than ctx allows. go-keyring's calls
// cannot be cancelled (it waits on a prompt with no bound), so a read the keyring does not answer is left behind
// and its answer, if one ever comes, thrown away. To keep such reads from piling up, callers wait for the read
// under way; one that began before the caller asked may have missed a change made since, so the caller then
// reads again. A read unanswered for longer than the bound is given up on, and the next caller starts another.
func (c *KeyringCache) readWithin(ctx context.Context, account string) (string, error) {
	asked := time.Now()
	for {
		if ctx.Err() != nil {
			return "", c.noAnswer(fmt.Sprintf("to read the entry %q", account))
		}
		c.mu.Lock()
		r := c.reading[account]
		if r == nil || time.Since(r.began) > c.answerBound {
			r = &keyringRead{began: time.Now(), done: make(chan struct{})}
			c.reading[account] = r
			go c.readInto(r, account)
		}
		c.mu.Unlock()
		select {
		case <-r.done:
			if !r.began.Before(asked) {
				return r.secret, r.err
			}
		case <-ctx.Done():
		}
	}
}

func (c *KeyringCache) readInto(r *keyringRead, account string) {
	secret, err := c.read(account)
	c.mu.Lock()
	r.secret, r.err = secret, err
	if c.reading[account] == r {
		delete(c.reading, account)
	}
	c.mu.Unlock()
	close(r.done)
}

// SetSecret writes account's entry in the OS keyring and forgets what was remembered of it.
func (c *KeyringCache) SetSecret(account, secret string) error {
	c.forget(account)
	return c.writeWithin(account, fmt.Sprintf("to write the entry %q", account), func() error {
		return c.Keyring.SetSecret(account, secret)
	})
}

// DeleteSecret removes account's entry from the OS keyring and forgets what was remembered of it.
func (c *KeyringCache) DeleteSecret(account string) error {
	c.forget(account)
	return c.writeWithin(account, fmt.Sprintf("to remove the entry %q", account), func() error {
		return c.Keyring.DeleteSecret(account)
	})
}

// writeWithin makes a change to account's entry in the keyring, waiting no longer than the bound. A locked
// keyring is asked to unlock first, as for a read. A change the keyring does not answer in time is left behind:
// it may still be made if the keyring answers later, which the error says; one not asked for before the bound
// ran out is not asked for at all.
func (c *KeyringCache) writeWithin(account, doing string, write func() error) error {
	ctx, cancel := context.WithTimeout(context.Background(), c.answerBound)
	defer cancel()
	if stamp, err := c.watch.stamp(ctx, c.service(), account); errors.Is(err, errLocked) {
		if err := c.watch.unlock(ctx, stamp); err != nil {
			return c.lockedError(ctx, doing, err)
		}
	}
	if ctx.Err() != nil {
		// The check took the whole bound: the change is not asked for now, to land at some later time.
		return fmt.Errorf("%w (nothing was changed)", c.noAnswer(doing))
	}
	done := make(chan error, 1)
	go func() { done <- write() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("%w (the change may still be made if it answers later)", c.noAnswer(doing))
	}
}

// noAnswer explains a read or write the keyring did not answer in time, and what to do about it.
func (c *KeyringCache) noAnswer(doing string) error {
	return fmt.Errorf("%w: %s did not answer within %v when asked %s; is its Secret Service waiting for the "+
		"keyring to be unlocked in a prompt nobody sees, or hung? Unlock the keyring or restart the Secret Service "+
		"(gnome-keyring-daemon, KeePassXC); on a host without one, use the encrypted key store: --master-key-file",
		errNoAnswer, c.Keyring, c.answerBound, doing)
}

// lockedError explains why the keyring could not be unlocked to do what doing says.
func (c *KeyringCache) lockedError(ctx context.Context, doing string, err error) error {
	switch {
	case ctx.Err() != nil:
		return c.noAnswer("to unlock the keyring " + doing)
	case errors.Is(err, errLocked):
		return fmt.Errorf("in the OS keyring: %s is locked, and was not unlocked %s (its unlock prompt was "+
			"dismissed or could not be shown): unlock the keyring and try again, or on a host without a desktop "+
			"use the encrypted key store: --master-key-file", c.Keyring, doing)
	}
	return keyringError(err)
}

func (c *KeyringCache) forget(account string) {
	c.mu.Lock()
	delete(c.remembered, account)
	c.mu.Unlock()
}
