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

// Token is a change token for a critical tool: prepare stores one describing
// exactly what will be done, and commit consumes it. Tokens live in the file
// rather than in memory so a prepare survives an agent restart with its TTL
// and single use still enforced.
type Token struct {
	ID        string          `json:"id"` // random, 128 bits, URL-safe
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	PlanHash  string          `json:"plan_hash"` // sha256 of canonical plan
	Principal string          `json:"principal"`
	CreatedAt time.Time       `json:"created_at"`
	ExpiresAt time.Time       `json:"expires_at"`
}

var (
	// ErrTokenNotFound means the token is unknown or was already used.
	ErrTokenNotFound = errors.New("store: change token not found or already used")
	// ErrTokenExpired means the token existed but its TTL had passed; it has
	// been deleted, so retrying gives ErrTokenNotFound.
	ErrTokenExpired = errors.New("store: change token expired")
)

// tokenIDBytes is 128 bits: unguessable, and short enough to paste.
const tokenIDBytes = 16

// NewTokenID returns 128 random bits, base64url without padding (22 chars).
func NewTokenID() (string, error) {
	var b [tokenIDBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("store: new token id: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// PutToken stores t durably. An ID already present is refused: a token is
// single use, and silently replacing one would change what its holder commits.
func (db *DB) PutToken(t Token) error {
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
		b, err := writableBucket(tx, bucketTokens)
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

// ConsumeToken deletes the token in the same write transaction that reads it
// and returns it. bbolt runs one writer at a time, so of any number of
// concurrent commits exactly one gets the token; the rest get
// ErrTokenNotFound. A token past ExpiresAt (expiry is at ExpiresAt, not after)
// is deleted too and returned alongside ErrTokenExpired, so the caller can say
// which tool it was for.
//
// The caller still checks Principal, Tool and PlanHash against the commit
// request; a token consumed by the wrong principal is gone, which fails safe.
func (db *DB) ConsumeToken(id string, now time.Time) (Token, error) {
	if id == "" {
		return Token{}, fmt.Errorf("%w: empty id", ErrTokenNotFound)
	}
	var (
		t     Token
		found bool
	)
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		b, err := writableBucket(tx, bucketTokens)
		if err != nil {
			return err
		}
		v := b.Get([]byte(id))
		if v == nil {
			return nil
		}
		found = true
		// Decode before deleting: v is only valid until the bucket changes.
		decErr := json.Unmarshal(v, &t)
		if err := b.Delete([]byte(id)); err != nil {
			return err
		}
		if decErr != nil {
			// Unreadable: delete it (committed) and report not found below.
			found = false
		}
		return nil
	})
	if err != nil {
		return Token{}, fmt.Errorf("store: consume token %s: %w", id, err)
	}
	if !found {
		return Token{}, fmt.Errorf("%w: id %s", ErrTokenNotFound, id)
	}
	if !now.Before(t.ExpiresAt) {
		return t, fmt.Errorf("%w: id %s for %s expired at %s",
			ErrTokenExpired, id, t.Tool, t.ExpiresAt.Format(time.RFC3339))
	}
	return t, nil
}

// PruneTokens deletes tokens expired at now (and unreadable ones) and returns
// how many it deleted, so abandoned prepares do not accumulate.
func (db *DB) PruneTokens(now time.Time) (int, error) {
	n := 0
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		b, err := writableBucket(tx, bucketTokens)
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
