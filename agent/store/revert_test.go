package store

import (
	"path/filepath"
	"testing"
	"time"
)

func TestGPIORevertQueue(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	_ = db.PutJob(Job{ID: "job-1", Status: "running", CreatedAt: now})
	for _, r := range []GPIORevert{{Pin: 17, Value: 0, Due: now.Add(time.Minute)}, {Pin: 27, Value: 1, Due: now.Add(time.Second)}, {Pin: 17, Value: 1, Due: now.Add(2 * time.Minute)}} {
		if err := db.PutGPIORevert(r); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	// Survives a reopen; one per pin (the later put replaced pin 17); soonest first.
	db, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	got, err := db.ListGPIOReverts()
	if err != nil || len(got) != 2 || got[0].Pin != 27 || got[1].Pin != 17 || got[1].Value != 1 || !got[1].Due.Equal(now.Add(2*time.Minute)) {
		t.Fatalf("%+v %v", got, err)
	}
	if jobs, _ := db.ListJobs(); len(jobs) != 1 {
		t.Fatalf("sampling jobs see the reverts: %+v", jobs)
	}
	if r, ok, _ := db.GPIORevertOf(27); !ok || r.Value != 1 {
		t.Fatalf("%+v %v", r, ok)
	}
	if err := db.DeleteGPIORevert(27); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := db.GPIORevertOf(27); ok {
		t.Fatal("not deleted")
	}
	if err := db.DeleteGPIORevert(99); err != nil {
		t.Fatalf("deleting an absent revert: %v", err)
	}
}
