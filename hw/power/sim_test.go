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

// waitFor polls cond for up to 5 s; timers under -race can be slow.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
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
	at := time.Now().Add(50 * time.Millisecond)
	if err := s.Schedule(ctx, Reboot, at); err != nil {
		t.Fatal(err)
	}
	got, ok, err := s.Scheduled(ctx)
	if err != nil || !ok || got.Action != Reboot || !got.At.Equal(at) {
		t.Fatalf("Scheduled = %+v, %v, %v", got, ok, err)
	}
	waitFor(t, "the reboot to be performed", func() bool { return len(s.Performed()) == 1 })
	if p := s.Performed()[0]; p.Action != Reboot || !p.At.Equal(at) {
		t.Fatalf("Performed = %+v", p)
	}
	if _, ok, _ := s.Scheduled(ctx); ok {
		t.Fatal("still scheduled after being performed")
	}
	want := []string{"scheduled:reboot", "performed:reboot"}
	if k := kinds(s.Events()); !equal(k, want) {
		t.Fatalf("Events = %v, want %v", k, want)
	}
	logged := readLog(t, logPath)
	if k := kinds(logged); !equal(k, want) {
		t.Fatalf("log = %v, want %v", k, want)
	}
	if !logged[0].At.Equal(at) || logged[1].Time.Before(at.Add(-time.Millisecond)) {
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
	at := time.Now().Add(30 * time.Millisecond)
	if err := s.Schedule(ctx, Poweroff, at); err != nil {
		t.Fatal(err)
	}
	c, ok, err := s.Cancel(ctx)
	if err != nil || !ok || c.Action != Poweroff || !c.At.Equal(at) {
		t.Fatalf("Cancel = %+v, %v, %v", c, ok, err)
	}
	time.Sleep(100 * time.Millisecond)
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
	if err := s.Schedule(ctx, Poweroff, time.Now().Add(20*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(60 * time.Millisecond)
	if err := s.Schedule(ctx, Reboot, at); err != nil {
		t.Fatal(err)
	}
	if got, ok, _ := s.Scheduled(ctx); !ok || got.Action != Reboot {
		t.Fatalf("Scheduled after replace = %+v", got)
	}
	waitFor(t, "the replacement to be performed", func() bool { return len(s.Performed()) == 1 })
	time.Sleep(50 * time.Millisecond)
	if p := s.Performed(); len(p) != 1 || p[0].Action != Reboot {
		t.Fatalf("Performed = %+v, want only the replacing reboot", p)
	}
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
	_ = s.Schedule(context.Background(), Reboot, time.Now().Add(20*time.Millisecond))
	s.Close()
	time.Sleep(60 * time.Millisecond)
	if len(s.Performed()) != 0 {
		t.Fatal("Close did not disarm the timer")
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
