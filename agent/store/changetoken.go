package store

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// ChangeToken is a change token for a critical tool: prepare stores one describing
// exactly what will be done, and commit consumes it. Tokens live in the file
// rather than in memory so a prepare survives an agent restart with its TTL
// and single use still enforced.
type ChangeToken struct {
	ID        string          `json:"id"` // random, 128 bits, URL-safe
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	PlanHash  string          `json:"plan_hash"` // sha256 of canonical plan
	Principal string          `json:"principal"`
	CreatedAt time.Time       `json:"created_at"`
	ExpiresAt time.Time       `json:"expires_at"`
}

var (
	// ErrChangeTokenNotFound means the token is unknown or was already used.
	ErrChangeTokenNotFound = errors.New("store: change token not found or already used")
	// ErrChangeTokenExpired means the token existed but its TTL had passed; it has
	// been deleted, so retrying gives ErrChangeTokenNotFound.
	ErrChangeTokenExpired = errors.New("store: change token expired")
)

// changeTokenIDBytes is 128 bits: unguessable, and short enough to paste.
const changeTokenIDBytes = 16

// NewChangeTokenID returns 128 random bits, base64url without padding (22 chars).
func NewChangeTokenID() (string, error) {
	var b [changeTokenIDBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("store: new token id: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// PutChangeToken stores t durably. An ID already present is refused: a token is
// single use, and silently replacing one would change what its holder commits.
func (db *DB) PutChangeToken(t ChangeToken) error {
	if t.ID == "" {
		return fmt.Errorf("store: put token for tool %q: empty id", t.Tool)
	}
	if t.ExpiresAt.IsZero() {
		return fmt.Errorf("store: put token %s: zero expires_at", t.ID)
	}
	if t.Arguments == nil {
		t.Arguments = json.RawMessage("null")
	}
	t.CreatedAt, t.ExpiresAt = t.CreatedAt.UTC(), t.ExpiresAt.UTC()
	val, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("store: put token %s: %w", t.ID, err)
	}
	err = db.bolt.Update(func(tx *bolt.Tx) error {
		b, err := writableBucket(tx, bucketChangeTokens)
		if err != nil {
			return err
		}
		if b.Get([]byte(t.ID)) != nil {
			return errors.New("id already in use")
		}
		return b.Put([]byte(t.ID), val)
	})
	if err != nil {
		return fmt.Errorf("store: put token %s: %w", t.ID, err)
	}
	return nil
}

// ConsumeChangeToken deletes the token in the same write transaction that reads it
// and returns it. bbolt runs one writer at a time, so of any number of
// concurrent commits exactly one gets the token; the rest get
// ErrChangeTokenNotFound. A token past ExpiresAt (expiry is at ExpiresAt, not after)
// is deleted too and returned alongside ErrChangeTokenExpired, so the caller can say
// which tool it was for.
func (db *DB) ConsumeChangeToken(id string, now time.Time) (ChangeToken, error) {
	return db.ConsumeChangeTokenIf(id, now, nil)
}

// ConsumeChangeTokenIf is ConsumeChangeToken with a check run on the token
// inside the same write transaction, before anything changes: when check
// returns an error the token stays as it was, and that error is returned
// as is, with the token. change_commit refuses this way what is not the
// holder's own doing (another principal presenting the token, a policy
// that refuses the call for now), so such a refusal neither uses a token
// up nor lets two commits race past the check: of concurrent commits that
// pass it, exactly one gets the token. check sees expired tokens too; it
// must not use db (the write lock is held) and should be quick.
func (db *DB) ConsumeChangeTokenIf(id string, now time.Time, check func(ChangeToken) error) (ChangeToken, error) {
	if id == "" {
		return ChangeToken{}, fmt.Errorf("%w: empty id", ErrChangeTokenNotFound)
	}
	var (
		t       ChangeToken
		found   bool
		refusal error
		errKeep = errors.New("kept")
	)
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		b, err := writableBucket(tx, bucketChangeTokens)
		if err != nil {
			return err
		}
		v := b.Get([]byte(id))
		if v == nil {
			return nil
		}
		found = true
		// Decode before deleting: v is only valid until the bucket changes.
		if json.Unmarshal(v, &t) != nil {
			// Unreadable: delete it (committed) and report not found below.
			found, t = false, ChangeToken{}
			return b.Delete([]byte(id))
		}
		if check != nil {
			if refusal = check(t); refusal != nil {
				return errKeep // rolls back: nothing changed anyway
			}
		}
		return b.Delete([]byte(id))
	})
	if refusal != nil {
		return t, refusal
	}
	if err != nil {
		return ChangeToken{}, fmt.Errorf("store: consume token %s: %w", id, err)
	}
	if !found {
		return ChangeToken{}, fmt.Errorf("%w: id %s", ErrChangeTokenNotFound, id)
	}
	if !now.Before(t.ExpiresAt) {
		return t, fmt.Errorf("%w: id %s for %s expired at %s",
			ErrChangeTokenExpired, id, t.Tool, t.ExpiresAt.Format(time.RFC3339))
	}
	return t, nil
}

// PruneChangeTokens deletes tokens expired at now (and unreadable ones) and returns
// how many it deleted, so abandoned prepares do not accumulate.
func (db *DB) PruneChangeTokens(now time.Time) (int, error) {
	n := 0
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		b, err := writableBucket(tx, bucketChangeTokens)
		if err != nil {
			return err
		}
		var del [][]byte
		c := b.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			var t struct {
				ExpiresAt time.Time `json:"expires_at"`
			}
			if json.Unmarshal(v, &t) != nil || !now.Before(t.ExpiresAt) {
				del = append(del, append([]byte(nil), k...))
			}
		}
		// Delete after the walk: deleting under a live cursor can skip keys.
		for _, k := range del {
			if err := b.Delete(k); err != nil {
				return fmt.Errorf("token %s: %w", k, err)
			}
		}
		n = len(del)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("store: prune tokens: %w", err)
	}
	return n, nil
}
