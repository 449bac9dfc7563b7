package store

import (
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// bucketApprovals holds a note per call that waits for an approval on the
// device, for as long as it waits: two small writes per approval, so a wait
// that an agent restart cuts short can still be declined and audited at the
// next start. Created on first use; a file without it has no waits.
const bucketApprovals = "approvals"

// PutApprovalWait notes that call id waits; note is the caller's JSON.
func (db *DB) PutApprovalWait(id string, note []byte) error {
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		b, err := writableBucket(tx, bucketApprovals)
		if err != nil {
			return err
		}
		return b.Put([]byte(id), note)
	})
	if err != nil {
		return fmt.Errorf("store: note approval wait %s: %w", id, err)
	}
	return nil
}

// DeleteApprovalWait removes the note of call id; no note is no error.
func (db *DB) DeleteApprovalWait(id string) error {
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucketApprovals))
		if b == nil {
			return nil
		}
		return b.Delete([]byte(id))
	})
	if err != nil {
		return fmt.Errorf("store: clear approval wait %s: %w", id, err)
	}
	return nil
}

// TakeApprovalWaits returns every note left and removes them, in one
// transaction: what a restart cut short.
func (db *DB) TakeApprovalWaits() (map[string][]byte, error) {
	out := map[string][]byte{}
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucketApprovals))
		if b == nil {
			return nil
		}
		if err := b.ForEach(func(k, v []byte) error {
			out[string(k)] = append([]byte(nil), v...)
			return nil
		}); err != nil {
			return err
		}
		return tx.DeleteBucket([]byte(bucketApprovals))
	})
	if err != nil {
		return nil, fmt.Errorf("store: take approval waits: %w", err)
	}
	return out, nil
}
