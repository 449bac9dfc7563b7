package power

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// waitFor polls cond; the minute is only a hang guard.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func readLog(t *testing.T, path string) []Event {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []Event
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		out = append(out, e)
	}
	return out
}

func kinds(evs []Event) []string {
	var k []string
	for _, e := range evs {
		k = append(k, e.Event+":"+string(e.Action))
	}
	return k
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestSimScheduleAndPerform(t *testing.T) {
	ctx := context.Background()
	logPath := filepath.Join(t.TempDir(), "power.jsonl")
	s := NewSim(logPath)
	t.Cleanup(func() { s.Close() })

	if _, ok, err := s.Scheduled(ctx); ok || err != nil {
		t.Fatalf("fresh Sim: Scheduled ok=%v err=%v", ok, err)
	}
	// An hour ahead it is certainly still pending when asked, however
	// slowly this runs.
	later := time.Now().Add(time.Hour)
	if err := s.Schedule(ctx, Reboot, later); err != nil {
		t.Fatal(err)
	}
	got, ok, err := s.Scheduled(ctx)
	if err != nil || !ok || got.Action != Reboot || !got.At.Equal(later) {
		t.Fatalf("Scheduled = %+v, %v, %v", got, ok, err)
	}
	// Moved to 50 ms from now, it is performed, never before its time.
	at := time.Now().Add(50 * time.Millisecond)
	if err := s.Schedule(ctx, Reboot, at); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the reboot to be performed", func() bool { return len(s.Performed()) == 1 })
	if p := s.Performed()[0]; p.Action != Reboot || !p.At.Equal(at) {
		t.Fatalf("Performed = %+v", p)
	}
	if _, ok, _ := s.Scheduled(ctx); ok {
		t.Fatal("still scheduled after being performed")
	}
	want := []string{"scheduled:reboot", "scheduled:reboot", "performed:reboot"}
	if k := kinds(s.Events()); !equal(k, want) {
		t.Fatalf("Events = %v, want %v", k, want)
	}
	logged := readLog(t, logPath)
	if k := kinds(logged); !equal(k, want) {
		t.Fatalf("log = %v, want %v", k, want)
	}
	if !logged[0].At.Equal(later) || !logged[1].At.Equal(at) || logged[2].Time.Before(at.Add(-time.Millisecond)) {
		t.Fatalf("log times wrong: %+v", logged)
	}
	if err := s.LogErr(); err != nil {
		t.Fatal(err)
	}
}

func TestSimCancelStopsTimer(t *testing.T) {
	ctx := context.Background()
	s := NewSim("")
	if _, ok, err := s.Cancel(ctx); ok || err != nil {
		t.Fatalf("Cancel with nothing pending: ok=%v err=%v", ok, err)
	}
	// An hour ahead, so the cancel certainly comes first; the timer is
	// then checked directly rather than by waiting to see nothing happen.
	at := time.Now().Add(time.Hour)
	if err := s.Schedule(ctx, Poweroff, at); err != nil {
		t.Fatal(err)
	}
	p := pending(s)
	c, ok, err := s.Cancel(ctx)
	if err != nil || !ok || c.Action != Poweroff || !c.At.Equal(at) {
		t.Fatalf("Cancel = %+v, %v, %v", c, ok, err)
	}
	if p.timer.Stop() {
		t.Fatal("Cancel left the timer armed")
	}
	// A timer that fired while being cancelled finds nothing to perform.
	s.perform(p)
	if p := s.Performed(); len(p) != 0 {
		t.Fatalf("cancelled action was performed: %+v", p)
	}
	if _, ok, _ := s.Cancel(ctx); ok {
		t.Fatal("second Cancel reported a cancellation")
	}
	want := []string{"scheduled:poweroff", "cancelled:poweroff"}
	if k := kinds(s.Events()); !equal(k, want) {
		t.Fatalf("Events = %v, want %v", k, want)
	}
}

func TestSimReplace(t *testing.T) {
	ctx := context.Background()
	s := NewSim("")
	t.Cleanup(func() { s.Close() })
	// Both an hour ahead, so neither fires before the replacement is
	// seen; then the replacing timer is made due at once.
	if err := s.Schedule(ctx, Poweroff, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	replaced := pending(s)
	at := time.Now().Add(time.Hour)
	if err := s.Schedule(ctx, Reboot, at); err != nil {
		t.Fatal(err)
	}
	if got, ok, _ := s.Scheduled(ctx); !ok || got.Action != Reboot || !got.At.Equal(at) {
		t.Fatalf("Scheduled after replace = %+v", got)
	}
	if replaced.timer.Stop() {
		t.Fatal("the replaced schedule's timer was left armed")
	}
	s.perform(replaced) // fired while being replaced: a no-op
	pending(s).timer.Reset(0)
	waitFor(t, "the replacement to be performed", func() bool { return len(s.Performed()) >= 1 })
	if p := s.Performed(); len(p) != 1 || p[0].Action != Reboot {
		t.Fatalf("Performed = %+v, want only the replacing reboot", p)
	}
}

// pending is the Sim's armed schedule, for checking its timer.
func pending(s *Sim) *simPending {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pending
}

func TestSimPastTimeFiresAtOnce(t *testing.T) {
	s := NewSim("")
	if err := s.Schedule(context.Background(), Reboot, time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "immediate perform", func() bool { return len(s.Performed()) == 1 })
}

func TestSimRejects(t *testing.T) {
	ctx := context.Background()
	s := NewSim("")
	for _, a := range []Action{"", "halt", "Reboot", "kexec"} {
		if err := s.Schedule(ctx, a, time.Now().Add(time.Hour)); err == nil {
			t.Errorf("Schedule(%q) accepted", a)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.Schedule(cctx, Reboot, time.Now().Add(time.Hour)); err == nil {
		t.Error("Schedule with cancelled ctx accepted")
	}
	if len(s.Events()) != 0 {
		t.Fatalf("rejected schedules were recorded: %+v", s.Events())
	}
	if _, ok, _ := s.Scheduled(ctx); ok {
		t.Fatal("rejected schedule is pending")
	}
}

func TestSimUnwritableLog(t *testing.T) {
	ctx := context.Background()
	s := NewSim(filepath.Join(t.TempDir(), "missing-dir", "power.jsonl"))
	if err := s.Schedule(ctx, Reboot, time.Now().Add(time.Hour)); err == nil {
		t.Fatal("Schedule succeeded though the log cannot be written")
	}
	if _, ok, _ := s.Scheduled(ctx); ok || len(s.Events()) != 0 {
		t.Fatal("a schedule was made though its log line failed")
	}
}

func TestSimEventsIsACopy(t *testing.T) {
	s := NewSim("")
	t.Cleanup(func() { s.Close() })
	_ = s.Schedule(context.Background(), Reboot, time.Now().Add(time.Hour))
	s.Events()[0].Event = "mutated"
	if s.Events()[0].Event != "scheduled" {
		t.Fatal("Events exposes internal state")
	}
}

func TestSimClose(t *testing.T) {
	s := NewSim("")
	_ = s.Schedule(context.Background(), Reboot, time.Now().Add(time.Hour))
	p := pending(s)
	s.Close()
	if p.timer.Stop() {
		t.Fatal("Close did not disarm the timer")
	}
	s.perform(p) // fired while closing: a no-op
	if len(s.Performed()) != 0 {
		t.Fatal("performed after Close")
	}
	if _, ok, _ := s.Scheduled(context.Background()); ok {
		t.Fatal("still scheduled after Close")
	}
}

// TestSimConcurrent is for -race: schedules, cancels, reads and fires at once.
func TestSimConcurrent(t *testing.T) {
	ctx := context.Background()
	s := NewSim(filepath.Join(t.TempDir(), "power.jsonl"))
	t.Cleanup(func() { s.Close() })
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 50 {
				a := Reboot
				if (i+j)%2 == 0 {
					a = Poweroff
				}
				switch j % 3 {
				case 0:
					_ = s.Schedule(ctx, a, time.Now().Add(time.Duration(j%5)*time.Millisecond))
				case 1:
					_, _, _ = s.Cancel(ctx)
				default:
					_, _, _ = s.Scheduled(ctx)
				}
			}
		})
	}
	wg.Wait()
	s.Close()
	if err := s.LogErr(); err != nil {
		t.Fatal(err)
	}
	logged := readLog(t, s.logPath)
	if len(logged) != len(s.Events()) {
		t.Fatalf("log has %d lines, history %d events", len(logged), len(s.Events()))
	}
}
