package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"
)

// GPIORevert is the end of a timed GPIO write (duration_ms): at Due the pin
// goes back to Value. It is queued in the jobs bucket so it happens even if
// the agent or the helper restarts in between; an overdue one runs at once.
type GPIORevert struct {
	Pin           int       `json:"pin"`
	Value         int       `json:"value"`
	Due           time.Time `json:"due"`
	Principal     string    `json:"principal"`
	CorrelationID string    `json:"correlation_id"`
}

const jobPrefixGPIORevert = "gpio-revert/"

func revertKey(pin int) []byte { return []byte(jobPrefixGPIORevert + strconv.Itoa(pin)) }

// PutGPIORevert stores (or replaces) the pending revert of a pin, durably.
func (db *DB) PutGPIORevert(r GPIORevert) error {
	r.Due = r.Due.UTC()
	val, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("store: gpio revert of pin %d: %w", r.Pin, err)
	}
	return db.bolt.Update(func(tx *bolt.Tx) error {
		b, err := writableBucket(tx, bucketJobs)
		if err != nil {
			return err
		}
		return b.Put(revertKey(r.Pin), val)
	})
}

// GPIORevertOf returns the pending revert of a pin, if any.
func (db *DB) GPIORevertOf(pin int) (GPIORevert, bool, error) {
	var r GPIORevert
	found := false
	err := db.bolt.View(func(tx *bolt.Tx) error {
		b := bucket(tx, bucketJobs)
		if b == nil {
			return nil
		}
		v := b.Get(revertKey(pin))
		if v == nil {
			return nil
		}
		found = true
		return json.Unmarshal(v, &r)
	})
	if err != nil {
		return GPIORevert{}, false, fmt.Errorf("store: gpio revert of pin %d: %w", pin, err)
	}
	return r, found, nil
}

// ListGPIOReverts returns every pending revert, soonest first.
func (db *DB) ListGPIOReverts() ([]GPIORevert, error) {
	var out []GPIORevert
	err := db.bolt.View(func(tx *bolt.Tx) error {
		b := bucket(tx, bucketJobs)
		if b == nil {
			return nil
		}
		c := b.Cursor()
		p := []byte(jobPrefixGPIORevert)
		for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
			var r GPIORevert
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("key %q: %w", k, err)
			}
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: list gpio reverts: %w", err)
	}
	slices.SortFunc(out, func(a, b GPIORevert) int { return a.Due.Compare(b.Due) })
	return out, nil
}

// DeleteGPIORevert drops a pin's pending revert; absent is not an error.
func (db *DB) DeleteGPIORevert(pin int) error {
	return db.bolt.Update(func(tx *bolt.Tx) error {
		b, err := writableBucket(tx, bucketJobs)
		if err != nil {
			return err
		}
		return b.Delete(revertKey(pin))
	})
}
