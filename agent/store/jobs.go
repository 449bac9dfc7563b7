package store

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// The jobs bucket holds every kind of background job the agent must resume
// after a restart: sampling now, scheduled reboots and GPIO reverts later.
// Each kind has its own key prefix, so one kind can be listed with a prefix
// seek and ids of different kinds never collide. Values are JSON, like the
// other small records in the file: a handful of jobs, read once at start-up,
// and readable with stock bbolt tools.
const jobPrefixSampling = "sampling/"

// ErrJobNotFound is returned by GetJob and DeleteJob for an id that is not
// stored.
var ErrJobNotFound = errors.New("store: job not found")

// jobIDBytes gives "job-" + 8 hex characters: short enough to say and type,
// and 32 bits is plenty for the few jobs one device runs.
const jobIDBytes = 4

// NewJobID returns a short, URL-safe id such as "job-1f3a9c0e". It does not
// check the id is unused; with a handful of jobs a clash is a one in a
// hundred million event, and PutJob would then update the existing job.
func NewJobID() (string, error) {
	var b [jobIDBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("store: new job id: %w", err)
	}
	return "job-" + hex.EncodeToString(b[:]), nil
}

func samplingJobKey(id string) []byte { return []byte(jobPrefixSampling + id) }

// PutJob stores j under its ID, durably, replacing any job with that ID: it
// is how a job is created and how its status changes. Times are stored in UTC.
// It does not touch the job's samples.
func (db *DB) PutJob(j Job) error {
	if j.ID == "" {
		return errors.New("store: put job: empty id")
	}
	// UTC also drops the monotonic reading, so what GetJob returns equals
	// what was put.
	j.CreatedAt, j.StoppedAt = j.CreatedAt.UTC(), j.StoppedAt.UTC()
	val, err := json.Marshal(j)
	if err != nil {
		return fmt.Errorf("store: put job %q: %w", j.ID, err)
	}
	err = db.bolt.Update(func(tx *bolt.Tx) error {
		b, err := writableBucket(tx, bucketJobs)
		if err != nil {
			return err
		}
		return b.Put(samplingJobKey(j.ID), val)
	})
	if err != nil {
		return fmt.Errorf("store: put job %q: %w", j.ID, err)
	}
	return nil
}

// GetJob returns the job with the given id, or an error wrapping
// ErrJobNotFound.
func (db *DB) GetJob(id string) (Job, error) {
	var (
		j     Job
		found bool
	)
	err := db.bolt.View(func(tx *bolt.Tx) error {
		b := bucket(tx, bucketJobs)
		if b == nil {
			return nil
		}
		v := b.Get(samplingJobKey(id))
		if v == nil {
			return nil
		}
		found = true
		return json.Unmarshal(v, &j)
	})
	if err != nil {
		return Job{}, fmt.Errorf("store: get job %q: %w", id, err)
	}
	if !found {
		return Job{}, fmt.Errorf("%w: id %q", ErrJobNotFound, id)
	}
	return j, nil
}

// ListJobs returns every sampling job, oldest first (CreatedAt, then ID for
// jobs created in the same instant), so the order is stable across calls and
// restarts. A stored job that does not decode is an error naming its key
// rather than a job silently not resumed.
func (db *DB) ListJobs() ([]Job, error) {
	var jobs []Job
	err := db.bolt.View(func(tx *bolt.Tx) error {
		b := bucket(tx, bucketJobs)
		if b == nil {
			return nil
		}
		prefix := []byte(jobPrefixSampling)
		c := b.Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var j Job
			if err := json.Unmarshal(v, &j); err != nil {
				return fmt.Errorf("key %q: %w", k, err)
			}
			jobs = append(jobs, j)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: list jobs: %w", err)
	}
	slices.SortFunc(jobs, func(a, b Job) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return jobs, nil
}

// DeleteJob removes the job with the given id, or returns an error wrapping
// ErrJobNotFound, so that a mistyped id is reported rather than "deleted".
// It does not delete the job's samples: DeleteSamples does, and keeping the
// two apart lets a caller stop a job and keep its history until retention.
func (db *DB) DeleteJob(id string) error {
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		b, err := writableBucket(tx, bucketJobs)
		if err != nil {
			return err
		}
		k := samplingJobKey(id)
		if b.Get(k) == nil {
			// Returning an error rolls back: no commit, no meta page
			// written for nothing.
			return fmt.Errorf("%w: id %q", ErrJobNotFound, id)
		}
		return b.Delete(k)
	})
	if errors.Is(err, ErrJobNotFound) {
		return err
	}
	if err != nil {
		return fmt.Errorf("store: delete job %q: %w", id, err)
	}
	return nil
}
