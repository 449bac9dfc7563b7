package store

import (
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// PowerJob is a scheduled reboot or power-off. logind holds the real
// schedule; this copy in the jobs bucket is what lets the agent list and
// cancel it, put it back if the helper or logind lost it, tell afterwards
// that it happened, and rate-limit the next one. There is at most one, as in
// logind.
type PowerJob struct {
	ID            string    `json:"id"`
	Action        string    `json:"action"` // reboot or poweroff
	At            time.Time `json:"at"`
	Created       time.Time `json:"created"`
	Principal     string    `json:"principal"`
	CorrelationID string    `json:"correlation_id"`
	Reason        string    `json:"reason,omitempty"`
}

const (
	keyPowerPending = "power/pending"
	metaPowerLast   = "power.last"
)

// PutPowerJob stores (or replaces) the pending power action, durably.
func (db *DB) PutPowerJob(j PowerJob) error {
	j.At, j.Created = j.At.UTC(), j.Created.UTC()
	val, err := json.Marshal(j)
	if err != nil {
		return fmt.Errorf("store: power job %s: %w", j.ID, err)
	}
	return db.bolt.Update(func(tx *bolt.Tx) error {
		b, err := writableBucket(tx, bucketJobs)
		if err != nil {
			return err
		}
		return b.Put([]byte(keyPowerPending), val)
	})
}

// PendingPower returns the pending power action, if any.
func (db *DB) PendingPower() (PowerJob, bool, error) {
	var j PowerJob
	found := false
	err := db.bolt.View(func(tx *bolt.Tx) error {
		b := bucket(tx, bucketJobs)
		if b == nil {
			return nil
		}
		v := b.Get([]byte(keyPowerPending))
		if v == nil {
			return nil
		}
		found = true
		return json.Unmarshal(v, &j)
	})
	if err != nil {
		return PowerJob{}, false, fmt.Errorf("store: pending power job: %w", err)
	}
	return j, found, nil
}

// FinishPower removes the pending action; with done it also records its time
// as the last power action (the rate limit counts from it).
func (db *DB) FinishPower(done bool, at time.Time) error {
	return db.bolt.Update(func(tx *bolt.Tx) error {
		b, err := writableBucket(tx, bucketJobs)
		if err != nil {
			return err
		}
		if err := b.Delete([]byte(keyPowerPending)); err != nil {
			return err
		}
		if !done {
			return nil
		}
		meta, err := writableBucket(tx, bucketMeta)
		if err != nil {
			return err
		}
		return putJSON(meta, metaPowerLast, at.UTC())
	})
}

// LastPower returns when the last power action raspi-mcp scheduled took
// effect (zero if none).
func (db *DB) LastPower() (time.Time, error) {
	var t time.Time
	err := db.bolt.View(func(tx *bolt.Tx) error {
		meta := bucket(tx, bucketMeta)
		if meta == nil {
			return nil
		}
		v := meta.Get([]byte(metaPowerLast))
		if v == nil {
			return nil
		}
		return json.Unmarshal(v, &t)
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("store: last power action: %w", err)
	}
	return t, nil
}
