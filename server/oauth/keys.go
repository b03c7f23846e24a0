package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// How often the authorization server's key set is fetched again. A token that no key of the last fetch verifies
// (its kid is unknown, or the key of its kid does not verify it) makes the server fetch the set again, as OpenID
// Connect expects of a provider rotating its keys, but no sooner than keysRefetchInterval after the last fetch:
// otherwise every request with a forged token would be a request to the provider. A provider's new key is
// therefore accepted at most a minute after the first token signed with it (providers publish keys before they
// sign with them). After a failed fetch the wait is keysRetryInterval, so that a provider briefly unreachable
// does not refuse every token for a minute.
const (
	keysRefetchInterval = time.Minute
	keysRetryInterval   = 5 * time.Second
)

// maxKeySetBytes bounds the key set document; real ones hold a few keys.
const maxKeySetBytes = 1 << 20

// signingAlgs are the JWS algorithms a key of the set may verify; the verifier checks a token's alg against
// those the provider supports before its key set is asked.
var signingAlgs = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512, jose.ES256, jose.ES384, jose.ES512, jose.PS256, jose.PS384, jose.PS512, jose.EdDSA,
}

// providerKeys is the authorization server's key set (its jwks_uri), an oidc.KeySet that fetches the keys at most
// once per keysRefetchInterval. Safe for concurrent use; callers arriving during a fetch wait for it.
type providerKeys struct {
	url    string
	client *http.Client
	now    func() time.Time

	mu        sync.Mutex
	keys      []jose.JSONWebKey // of the last good fetch
	lastFetch time.Time         // when the last fetch began; zero before the first
	fetchErr  error             // why the last fetch failed; nil when it did not
	fetching  chan struct{}     // closed when the fetch under way ends; nil when none is
}

// VerifySignature returns the payload of raw, a compact JWS (a JWT never takes the JSON serialization), when a key
// of the set verifies its signature.
func (k *providerKeys) VerifySignature(ctx context.Context, raw string) ([]byte, error) {
	jws, err := jose.ParseSignedCompact(raw, signingAlgs)
	if err != nil {
		return nil, fmt.Errorf("malformed JWT: %v", err)
	}
	k.mu.Lock()
	keys := k.keys
	k.mu.Unlock()
	if payload, ok := verifyWithAny(jws, keys); ok {
		return payload, nil
	}
	keys, err = k.refresh(ctx)
	if payload, ok := verifyWithAny(jws, keys); ok {
		return payload, nil
	}
	if err != nil {
		return nil, fmt.Errorf("fetching the authorization server's keys: %w", err)
	}
	return nil, errors.New("no key of the authorization server verifies the token's signature")
}

// verifyWithAny verifies jws with the keys of its kid (every key when it names none), but not with a key meant for
// another algorithm than the token's.
func verifyWithAny(jws *jose.JSONWebSignature, keys []jose.JSONWebKey) ([]byte, bool) {
	header := jws.Signatures[0].Header // ParseSigned of a compact JWS: exactly one signature
	for i := range keys {
		if header.KeyID != "" && keys[i].KeyID != header.KeyID || keys[i].Algorithm != "" &&
			keys[i].Algorithm != header.Algorithm {
			continue
		}
		if payload, err := jws.Verify(&keys[i]); err == nil {
			return payload, true
		}
	}
	return nil, false
}

// refresh fetches the key set unless the last fetch began less than its interval ago, waits for the fetch under
// way, and returns the keys then held with the error of the last fetch.
func (k *providerKeys) refresh(ctx context.Context) ([]jose.JSONWebKey, error) {
	k.mu.Lock()
	if k.fetching == nil && k.due() {
		k.lastFetch = k.now()
		k.fetching = make(chan struct{})
		go k.fetch(k.fetching)
	}
	done := k.fetching
	k.mu.Unlock()
	if done != nil {
		select {
		case <-done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.keys, k.fetchErr
}

// due reports whether the key set may be fetched again. k.mu must be held.
func (k *providerKeys) due() bool {
	wait := keysRefetchInterval
	if k.fetchErr != nil {
		wait = keysRetryInterval
	}
	return k.lastFetch.IsZero() || k.now().Sub(k.lastFetch) >= wait
}

// fetch downloads the key set and keeps it (a failed fetch keeps the keys of the last good one), then closes done.
// It runs apart from the request that started it, so that other requests waiting for it are not cut short when
// that one is cancelled.
func (k *providerKeys) fetch(done chan struct{}) {
	keys, err := k.download()
	k.mu.Lock()
	if err == nil {
		k.keys = keys
	}
	k.fetchErr = err
	k.fetching = nil
	k.mu.Unlock()
	close(done)
}

func (k *providerKeys) download() ([]jose.JSONWebKey, error) {
	ctx, cancel := context.WithTimeout(context.Background(), discoveryTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := k.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxKeySetBytes+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("reading %s: %w", k.url, err)
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("%s answered %s", k.url, resp.Status)
	case len(body) > maxKeySetBytes:
		return nil, fmt.Errorf("%s holds more than %d bytes", k.url, maxKeySetBytes)
	}
	return parseKeySet(k.url, body)
}

// parseKeySet reads a JWK Set, keeping the public keys that can verify signatures. Others (encryption keys,
// symmetric keys, key types or curves go-jose does not know) are skipped, as RFC 7517 §5 asks: they cannot
// verify any token, and a symmetric key published in the set must never verify one.
func parseKeySet(from string, body []byte) ([]jose.JSONWebKey, error) {
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, fmt.Errorf("%s is not a JWK Set: %v", from, err)
	}
	var keys []jose.JSONWebKey
	for _, raw := range set.Keys {
		var key jose.JSONWebKey
		if json.Unmarshal(raw, &key) != nil || !key.Valid() || !key.IsPublic() || key.Use == "enc" {
			continue
		}
		if key.Algorithm != "" && !slices.Contains(signingAlgs, jose.SignatureAlgorithm(key.Algorithm)) {
			continue
		}
		keys = append(keys, key)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%s holds no public signing key", from)
	}
	return keys, nil
}
