package store

import (
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// UpdateJob is a self-update of raspi-mcp under way. The root helper's
// updater does the work and survives the restart it causes; this copy in
// the jobs bucket is what lets manage_list_jobs show it, and what the new
// agent, on the same database, completes when the run ends. There is at
// most one.
type UpdateJob struct {
	ID            string    `json:"id"`
	From          string    `json:"from"`
	To            string    `json:"to"`
	Channel       string    `json:"channel"`
	Started       time.Time `json:"started"`
	Principal     string    `json:"principal"`
	CorrelationID string    `json:"correlation_id"`
	Reason        string    `json:"reason,omitempty"`
}

// LastUpdate is how the latest self-update ended.
type LastUpdate struct {
	ID       string    `json:"id"`
	From     string    `json:"from"`
	To       string    `json:"to"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Outcome  string    `json:"outcome"` // succeeded, failed or rolled_back
	Reason   string    `json:"reason,omitempty"`
}

const (
	keyUpdatePending = "update/pending"
	metaUpdateLast   = "update.last"
)

// PutUpdateJob stores the self-update under way, durably.
func (db *DB) PutUpdateJob(j UpdateJob) error {
	j.Started = j.Started.UTC()
	val, err := json.Marshal(j)
	if err != nil {
		return fmt.Errorf("store: update job %s: %w", j.ID, err)
	}
	return db.bolt.Update(func(tx *bolt.Tx) error {
		b, err := writableBucket(tx, bucketJobs)
		if err != nil {
			return err
		}
		return b.Put([]byte(keyUpdatePending), val)
	})
}

// PendingUpdate returns the self-update under way, if any.
func (db *DB) PendingUpdate() (UpdateJob, bool, error) {
	var j UpdateJob
	found, err := db.getJSON(bucketJobs, keyUpdatePending, &j)
	if err != nil {
		return UpdateJob{}, false, fmt.Errorf("store: pending update job: %w", err)
	}
	return j, found, nil
}

// FinishUpdate removes the pending job and records how it ended, in one
// transaction, so the outcome is never lost between the two.
func (db *DB) FinishUpdate(last LastUpdate) error {
	last.Started, last.Finished = last.Started.UTC(), last.Finished.UTC()
	return db.bolt.Update(func(tx *bolt.Tx) error {
		b, err := writableBucket(tx, bucketJobs)
		if err != nil {
			return err
		}
		if err := b.Delete([]byte(keyUpdatePending)); err != nil {
			return err
		}
		meta, err := writableBucket(tx, bucketMeta)
		if err != nil {
			return err
		}
		return putJSON(meta, metaUpdateLast, last)
	})
}

// LastSelfUpdate returns how the latest self-update ended; ok is false
// when there never was one.
func (db *DB) LastSelfUpdate() (LastUpdate, bool, error) {
	var l LastUpdate
	found, err := db.getJSON(bucketMeta, metaUpdateLast, &l)
	if err != nil {
		return LastUpdate{}, false, fmt.Errorf("store: last update: %w", err)
	}
	return l, found, nil
}

func (db *DB) getJSON(bucketName, key string, v any) (bool, error) {
	found := false
	err := db.bolt.View(func(tx *bolt.Tx) error {
		b := bucket(tx, bucketName)
		if b == nil {
			return nil
		}
		raw := b.Get([]byte(key))
		if raw == nil {
			return nil
		}
		found = true
		return json.Unmarshal(raw, v)
	})
	return found, err
}

// DropUpdateJob removes the pending job id without an outcome: the helper
// refused to start it, so nothing happened.
func (db *DB) DropUpdateJob(id string) error {
	return db.bolt.Update(func(tx *bolt.Tx) error {
		b, err := writableBucket(tx, bucketJobs)
		if err != nil {
			return err
		}
		var j UpdateJob
		if v := b.Get([]byte(keyUpdatePending)); v == nil || json.Unmarshal(v, &j) != nil || j.ID != id {
			return nil
		}
		return b.Delete([]byte(keyUpdatePending))
	})
}
