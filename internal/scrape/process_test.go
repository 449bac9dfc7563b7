package scrape

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// hangGuard only keeps a broken build from hanging the test; nothing here
// depends on how fast the machine is.
const hangGuard = time.Minute

// The test binary doubles as the exporter child: Process starts it with no
// arguments and an empty environment, so the name it is started by (a
// symlink in the test's directory) says how it behaves.
func TestMain(m *testing.M) {
	switch filepath.Base(os.Args[0]) {
	case "fake-exporter":
		if err := Serve(os.Stdin, os.Stdout, &fakeRenderer{}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	case "crash-exporter":
		os.Exit(3)
	case "mute-exporter": // reads and never answers
		buf := make([]byte, 1<<16)
		for {
			if _, err := os.Stdin.Read(buf); err != nil {
				select {} // and keeps hanging, until killed
			}
		}
	}
	os.Exit(m.Run())
}

// fakeRenderer answers with what it was given, and fails on Accept "fail".
type fakeRenderer struct {
	tables int
	last   *Family
}

func (f *fakeRenderer) Render(_ context.Context, accept string, s *Snapshot) (Page, error) {
	if accept == "fail" {
		return Page{}, errors.New("fake: asked to fail")
	}
	if len(s.Families) > 0 && &s.Families[0] != f.last {
		f.tables++
		f.last = &s.Families[0]
	}
	body := fmt.Sprintf("points=%d tables=%d env=%d pid=%d", len(s.Points), f.tables, len(os.Environ()), s.ProcessPID)
	return Page{ContentType: "text/plain", Body: []byte(body), Problems: []string{"accept " + accept}}, nil
}

// exporter links the test binary under name in a fresh directory.
func exporter(t *testing.T, name string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), name)
	if err := os.Symlink(self, p); err != nil {
		t.Fatal(err)
	}
	return p
}

func render(t *testing.T, p *Process, accept string) (Page, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	return p.Render(ctx, accept, testSnapshot())
}

// The child starts at the first render and serves the next ones; it gets
// the family table once and nothing of the agent's environment.
func TestProcessRenders(t *testing.T) {
	p := NewProcess(exporter(t, "fake-exporter"), nil)
	defer p.Close()
	if p.Pid() != 0 {
		t.Fatal("a child runs before the first scrape")
	}
	for i := range 3 {
		page, err := render(t, p, "text/plain")
		if err != nil {
			t.Fatal(err)
		}
		if want := "points=4 tables=1 env=0 pid=4242"; string(page.Body) != want || page.ContentType != "text/plain" || page.Problems[0] != "accept text/plain" {
			t.Fatalf("render %d: %+v, want body %q", i, page, want)
		}
	}
	// A renderer's error is the scrape's, and the child stays.
	pid := p.Pid()
	if _, err := render(t, p, "fail"); err == nil || !strings.Contains(err.Error(), "fake: asked to fail") {
		t.Fatalf("a failing render: %v", err)
	}
	if p.Pid() != pid {
		t.Fatal("a render error restarted the child")
	}
	// A changed table is sent again.
	s := testSnapshot()
	s.Families = append([]Family{{Name: "raspi_up", Type: Gauge, Help: "Up."}}, testFams...)
	s.Points = nil
	page, err := p.Render(context.Background(), "", s)
	if err != nil || !strings.Contains(string(page.Body), "tables=2") {
		t.Fatalf("a new table: %q %v", page.Body, err)
	}
}

// A child that died between scrapes is replaced, and the scrape works.
func TestProcessRestartsDeadChild(t *testing.T) {
	p := NewProcess(exporter(t, "fake-exporter"), nil)
	defer p.Close()
	if _, err := render(t, p, ""); err != nil {
		t.Fatal(err)
	}
	old := p.Pid()
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	page, err := render(t, p, "")
	if err != nil {
		t.Fatal(err)
	}
	if p.Pid() == old || p.Pid() == 0 || !strings.HasPrefix(string(page.Body), "points=4 tables=1") {
		t.Fatalf("after the kill: pid %d (was %d), %q", p.Pid(), old, page.Body)
	}
}

// A binary that is missing, exits, or never answers fails the scrape with
// a reason; it never hangs it.
func TestProcessFailures(t *testing.T) {
	p := NewProcess(filepath.Join(t.TempDir(), "raspi-mcp-exporter"), nil)
	if _, err := render(t, p, ""); err == nil || !strings.Contains(err.Error(), "starting") {
		t.Fatalf("missing binary: %v", err)
	}

	p = NewProcess(exporter(t, "crash-exporter"), nil)
	defer p.Close()
	if _, err := render(t, p, ""); err == nil || !strings.Contains(err.Error(), "crash-exporter") {
		t.Fatalf("a child that exits: %v", err)
	}
	if p.Pid() != 0 {
		t.Fatal("the crashed child is still counted as running")
	}

	p = NewProcess(exporter(t, "mute-exporter"), nil)
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := p.Render(ctx, "", testSnapshot()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a child that never answers: %v", err)
	}
	if p.Pid() != 0 {
		t.Fatal("the mute child is still counted as running")
	}
}

// Close ends the child through its stdin (it exits by itself) and refuses
// every later render, so a scrape racing the agent's stop cannot start a
// new one.
func TestProcessClose(t *testing.T) {
	p := NewProcess(exporter(t, "fake-exporter"), nil)
	p.grace = hangGuard // a busy machine may take seconds to schedule its exit
	if _, err := render(t, p, ""); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	c := p.child
	p.mu.Unlock()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.done:
	default:
		t.Fatal("Close returned with the child running")
	}
	if c.err != nil {
		t.Fatalf("the child did not exit by itself at the end of its stdin: %v", c.err)
	}
	if _, err := render(t, p, ""); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("render after Close: %v", err)
	}
	if p.Pid() != 0 {
		t.Fatal("a child runs after Close")
	}
}

// Scrapes that arrive together take turns on the one child.
func TestProcessConcurrentScrapes(t *testing.T) {
	p := NewProcess(exporter(t, "fake-exporter"), nil)
	defer p.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
			defer cancel()
			page, err := p.Render(ctx, "", testSnapshot())
			if err == nil && !strings.HasPrefix(string(page.Body), "points=4") {
				err = fmt.Errorf("body %q", page.Body)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestUnavailable(t *testing.T) {
	if _, err := Unavailable("metrics: no exporter").Render(context.Background(), "", testSnapshot()); err == nil || err.Error() != "metrics: no exporter" {
		t.Fatal(err)
	}
}
