package credentials

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/e2b-mcp/e2b-mcp/state"
)

// DataKeyRotation is what RotateDataKey did.
type DataKeyRotation struct {
	Resealed int  // envd tokens sealed again under the new data key
	Finished bool // it only finished an earlier rotation that had been stopped between its two steps
}

// RotateDataKey replaces the state store's data key, held in keys under DataKeyAccount, with a new random key,
// and seals every token of st (opened with StateKeys(keys)) again under it.
//
// The store and the key store cannot change in one atomic step, so the order keeps every moment readable:
//  1. the new key is stored under NextDataKeyAccount (DataKeyAccount still opens the store);
//  2. the store's tokens and check value are sealed again under it, in one transaction;
//  3. DataKeyAccount gets the new key, and NextDataKeyAccount is removed.
//
// Stopped after 2, the store is sealed under the key in NextDataKeyAccount while DataKeyAccount holds the old
// one: StateKeys tolerates that (it offers the pending key, which the store's check value names), so servers
// start and read tokens, and the next RotateDataKey finishes step 3 first. Replacing DataKeyAccount before
// step 2 instead would leave, if stopped there, a key store whose data key opens nothing.
func RotateDataKey(keys SecretStore, st state.Rekeyer) (DataKeyRotation, error) {
	current, err := keys.Secret(DataKeyAccount)
	if errors.Is(err, ErrNotFound) {
		return DataKeyRotation{}, fmt.Errorf("%s holds no data key (account %q) yet: the state store has sealed "+
			"nothing, so there is nothing to rotate", keys, DataKeyAccount)
	}
	if err != nil {
		return DataKeyRotation{}, fmt.Errorf("reading the data key (account %q): %w", DataKeyAccount, err)
	}
	if _, err := decodeDataKey(keys, DataKeyAccount, current); err != nil {
		return DataKeyRotation{}, err
	}
	pending, err := dataKeySource{store: keys}.PendingDataKey()
	if err != nil {
		return DataKeyRotation{}, err
	}
	if pending != nil {
		under, err := st.SealedUnder(pending)
		if err != nil {
			return DataKeyRotation{}, err
		}
		if under {
			// An earlier rotation got past step 2: finish it, and let the operator run another if wanted.
			return DataKeyRotation{Finished: true}, promote(keys, pending)
		}
		// Stopped before step 2: that key never sealed anything, and a new one replaces it below.
	}

	next := make([]byte, state.DataKeySize)
	if _, err := rand.Read(next); err != nil {
		return DataKeyRotation{}, fmt.Errorf("generating a data key: %w", err)
	}
	defer clear(next)
	if err := keys.SetSecret(NextDataKeyAccount, base64.StdEncoding.EncodeToString(next)); err != nil {
		return DataKeyRotation{}, fmt.Errorf("storing the new data key (account %q): %w; nothing was changed",
			NextDataKeyAccount, err)
	}
	n, err := st.RotateDataKey(next)
	if err != nil {
		return DataKeyRotation{}, fmt.Errorf("%w; the state store is still sealed under the old data key", err)
	}
	if err := promote(keys, next); err != nil {
		return DataKeyRotation{}, fmt.Errorf("the state store is sealed under the new data key (account %q), but %w; "+
			"servers still read it; run the rotation again to finish", NextDataKeyAccount, err)
	}
	return DataKeyRotation{Resealed: n}, nil
}

// promote is step 3: DataKeyAccount gets key, the pending key's entry goes.
func promote(keys SecretStore, key []byte) error {
	if err := keys.SetSecret(DataKeyAccount, base64.StdEncoding.EncodeToString(key)); err != nil {
		return fmt.Errorf("replacing the data key (account %q) failed: %w", DataKeyAccount, err)
	}
	if err := keys.DeleteSecret(NextDataKeyAccount); err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("removing the pending data key (account %q) failed: %w", NextDataKeyAccount, err)
	}
	return nil
}
