package store

import (
	"path/filepath"
	"testing"
	"time"
)

func TestPowerJobLifecycleSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := db.PendingPower(); err != nil || ok {
		t.Fatalf("fresh db has a pending power job (%v, %v)", ok, err)
	}
	at := time.Date(2026, 11, 23, 3, 0, 0, 0, time.UTC)
	j := PowerJob{ID: "job-1", Action: "reboot", At: at, Created: at.Add(-time.Hour), Principal: "pi", CorrelationID: "c1", Reason: "kernel"}
	if err := db.PutPowerJob(j); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if db, err = Open(path, Options{}); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	got, ok, err := db.PendingPower()
	if err != nil || !ok || got != j {
		t.Fatalf("after reopen: %+v %v %v, want %+v", got, ok, err, j)
	}
	if last, _ := db.LastPower(); !last.IsZero() {
		t.Fatalf("last power before any = %v", last)
	}
	if err := db.FinishPower(false, at); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := db.PendingPower(); ok {
		t.Fatal("cancelled job still pending")
	}
	if last, _ := db.LastPower(); !last.IsZero() {
		t.Fatalf("a cancelled job counted as done: %v", last)
	}
	db.PutPowerJob(j)
	if err := db.FinishPower(true, at); err != nil {
		t.Fatal(err)
	}
	if last, _ := db.LastPower(); !last.Equal(at) {
		t.Fatalf("last power = %v, want %v", last, at)
	}
}
