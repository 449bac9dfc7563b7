package store

import (
	"path/filepath"
	"testing"
	"time"
)

func TestUpdateJobSurvivesReopenAndFinishes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 11, 25, 1, 0, 0, 0, time.UTC)
	j := UpdateJob{ID: "job-1", From: "1.0.0", To: "1.1.0", Channel: "stable", Started: start, Principal: "alice", CorrelationID: "c1"}
	if err := db.PutUpdateJob(j); err != nil {
		t.Fatal(err)
	}
	// The agent restarts (the package's scripts restart it) on the same file.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if db, err = Open(path, Options{}); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	got, ok, err := db.PendingUpdate()
	if err != nil || !ok || got != j {
		t.Fatalf("pending after reopen: %+v %v %v", got, ok, err)
	}
	if _, ok, _ := db.LastSelfUpdate(); ok {
		t.Fatal("a last update before any ended")
	}
	last := LastUpdate{ID: j.ID, From: j.From, To: j.To, Started: start, Finished: start.Add(time.Minute), Outcome: "rolled_back", Reason: "no report"}
	if err := db.FinishUpdate(last); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := db.PendingUpdate(); ok {
		t.Fatal("the finished job is still pending")
	}
	if l, ok, err := db.LastSelfUpdate(); err != nil || !ok || l != last {
		t.Fatalf("last %+v %v %v", l, ok, err)
	}
}
