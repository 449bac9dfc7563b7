package store

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func TestNewJobID(t *testing.T) {
	re := regexp.MustCompile(`^job-[0-9a-f]{8}$`)
	seen := map[string]bool{}
	for range 100 {
		id, err := NewJobID()
		if err != nil {
			t.Fatal(err)
		}
		if !re.MatchString(id) {
			t.Fatalf("NewJobID() = %q, want job-<8 hex>", id)
		}
		if seen[id] {
			t.Fatalf("NewJobID() repeated %q", id)
		}
		seen[id] = true
	}
}

func sameJob(a, b Job) bool {
	return a.ID == b.ID && a.IntervalSeconds == b.IntervalSeconds && a.RetentionHours == b.RetentionHours &&
		a.Status == b.Status && a.Default == b.Default && a.CreatedBy == b.CreatedBy &&
		a.CreatedAt.Equal(b.CreatedAt) && a.StoppedAt.Equal(b.StoppedAt)
}

func TestJobsCRUD(t *testing.T) {
	path := testPath(t)
	db := openAt(t, path)
	defer func() { _ = db.Close() }()

	local := time.FixedZone("CET", 3600)
	j := Job{ID: "job-0000000a", IntervalSeconds: 5, RetentionHours: 168, Status: "running", Default: true,
		CreatedBy: "config", CreatedAt: baseTime.In(local).Add(123 * time.Nanosecond)}
	if err := db.PutJob(j); err != nil {
		t.Fatal(err)
	}
	got, err := db.GetJob(j.ID)
	if err != nil || !sameJob(got, j) || got.CreatedAt.Location() != time.UTC || !got.StoppedAt.IsZero() {
		t.Fatalf("GetJob = %+v, %v; want %+v in UTC", got, err, j)
	}

	// Update in place: stop it.
	j.Status, j.StoppedAt = "stopped", baseTime.Add(time.Hour)
	if err := db.PutJob(j); err != nil {
		t.Fatal(err)
	}
	if got, err := db.GetJob(j.ID); err != nil || !sameJob(got, j) {
		t.Fatalf("GetJob after stop = %+v, %v", got, err)
	}

	// Stored under the sampling prefix, as JSON.
	err = db.bolt.View(func(tx *bolt.Tx) error {
		v := tx.Bucket([]byte("jobs")).Get([]byte("sampling/" + j.ID))
		if !strings.Contains(string(v), `"status":"stopped"`) {
			t.Errorf("stored job = %s", v)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	if _, err := db.GetJob("job-nope"); !errors.Is(err, ErrJobNotFound) || !strings.Contains(err.Error(), "job-nope") {
		t.Errorf("GetJob(missing) err = %v", err)
	}
	if err := db.DeleteJob("job-nope"); !errors.Is(err, ErrJobNotFound) {
		t.Errorf("DeleteJob(missing) err = %v", err)
	}
	if err := db.PutJob(Job{}); err == nil {
		t.Error("PutJob with empty id accepted")
	}

	// Reopen, then delete.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openAt(t, path)
	if got, err := db.GetJob(j.ID); err != nil || !sameJob(got, j) {
		t.Fatalf("GetJob after reopen = %+v, %v", got, err)
	}
	if err := db.DeleteJob(j.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := db.GetJob(j.ID); !errors.Is(err, ErrJobNotFound) {
		t.Errorf("GetJob after delete err = %v", err)
	}
	if jobs, err := db.ListJobs(); err != nil || len(jobs) != 0 {
		t.Errorf("ListJobs after delete = %+v, %v", jobs, err)
	}
}

func TestListJobsOrderAndKinds(t *testing.T) {
	db := openTest(t)
	if jobs, err := db.ListJobs(); err != nil || jobs != nil {
		t.Fatalf("ListJobs on empty = %+v, %v", jobs, err)
	}
	t1, t2 := baseTime, baseTime.Add(time.Minute)
	for _, j := range []Job{
		{ID: "job-c", CreatedAt: t2},
		{ID: "job-b", CreatedAt: t1},
		{ID: "job-a", CreatedAt: t2},
		{ID: "job-z", CreatedAt: t1.Add(-time.Second)},
	} {
		if err := db.PutJob(j); err != nil {
			t.Fatal(err)
		}
	}
	// Other kinds of job share the bucket under their own prefixes.
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("jobs"))
		if err := b.Put([]byte("reboot/r1"), []byte(`{"id":"r1"}`)); err != nil {
			return err
		}
		return b.Put([]byte("gpio_revert/g1"), []byte(`not json`))
	})
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := db.ListJobs()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, j := range jobs {
		ids = append(ids, j.ID)
	}
	if got := strings.Join(ids, ","); got != "job-z,job-b,job-a,job-c" {
		t.Errorf("ListJobs order = %s, want job-z,job-b,job-a,job-c", got)
	}
	if _, err := db.GetJob("r1"); !errors.Is(err, ErrJobNotFound) {
		t.Errorf("GetJob found another kind's job: %v", err)
	}

	// A sampling job that does not decode is reported, by key.
	err = db.bolt.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("jobs")).Put([]byte("sampling/job-bad"), []byte(`{`))
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ListJobs(); err == nil || !strings.Contains(err.Error(), "sampling/job-bad") {
		t.Errorf("ListJobs with a bad value: %v", err)
	}
}
