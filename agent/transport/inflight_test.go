package transport

import (
	"testing"
	"time"
)

// The gate's arithmetic: one record a uid a window, a cap a window in all,
// and the next record counts the refusals left out.
func TestRefusalGate(t *testing.T) {
	var g refusalGate
	t0 := time.Unix(1_700_000_000, 0)
	type step struct {
		uid     int
		at      time.Duration
		ok      bool
		leftOut int
	}
	for i, s := range []step{
		{1, 0, true, 0},
		{1, time.Second, false, 0}, // the same uid within the window
		{2, time.Second, true, 1},
		{3, time.Second, false, 0}, // the cap (2) of the window
		{1, RefusalWindow, true, 1},
		{4, RefusalWindow, true, 0},
		{5, RefusalWindow, false, 0},
		{5, 2 * RefusalWindow, true, 1},
	} {
		ok, left := g.record(s.uid, t0.Add(s.at), 2)
		if ok != s.ok || left != s.leftOut {
			t.Errorf("step %d (uid %d at %s): %v, %d; want %v, %d", i, s.uid, s.at, ok, left, s.ok, s.leftOut)
		}
	}
}
