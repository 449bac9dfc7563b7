//go:build linux || darwin

package unixsock_test

import (
	"bufio"
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/raspi-mcp/raspi-mcp/internal/unixsock"
)

const emfileChild = "UNIXSOCK_EMFILE_CHILD"

// TestServeSurvivesEMFILE runs a real server out of file descriptors: a
// child process lowers RLIMIT_NOFILE, fills its table, and serves; this
// process connects. The child's accept fails with EMFILE; the first failure
// logged frees the descriptors, and the same Serve must then accept and
// answer the connection instead of having ended.
func TestServeSurvivesEMFILE(t *testing.T) {
	if os.Getenv(emfileChild) != "" {
		emfileServer(t, os.Getenv(emfileChild))
		return
	}
	sock := sockIn(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestServeSurvivesEMFILE$", "-test.count=1")
	cmd.Env = append(os.Environ(), emfileChild+"="+sock)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	var log []string
	next := func() string {
		if !lines.Scan() {
			t.Fatalf("child ended early; its output: %q; stderr: %s", log, stderr.String())
		}
		log = append(log, lines.Text())
		return lines.Text()
	}
	for next() != "full" {
	}
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(60 * time.Second)) // hang guard
	got, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || got != "served\n" {
		t.Fatalf("read from the child = %q, %v; child said %q", got, err, log)
	}
	for lines.Scan() {
		log = append(log, lines.Text())
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v; its output: %q; stderr: %s", err, log, stderr.String())
	}
	if !strings.Contains(strings.Join(log, "\n"), "EMFILE seen") {
		t.Fatalf("the child never ran out of descriptors; its output: %q", log)
	}
}

// emfileServer is the child's side.
func emfileServer(t *testing.T, sock string) {
	ln, err := unixsock.Listen(sock, 0o600, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	lim.Cur = 64
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	var hoard []*os.File
	for {
		f, err := os.Open(os.DevNull)
		if errors.Is(err, syscall.EMFILE) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		hoard = append(hoard, f)
	}
	release := &onFirstRecord{fn: func(r slog.Record) {
		if strings.Contains(recordErr(r), "too many open files") {
			os.Stdout.WriteString("EMFILE seen\n")
		}
		for _, f := range hoard {
			f.Close()
		}
	}}
	ctx, cancel := context.WithCancel(context.Background())
	os.Stdout.WriteString("full\n")
	err = unixsock.Serve(ctx, ln, slog.New(release), func(_ context.Context, c *net.UnixConn) {
		c.Write([]byte("served\n"))
		cancel()
	})
	if err != nil {
		t.Fatalf("Serve ended: %v", err)
	}
	if _, err := os.Lstat(filepath.Clean(sock)); !os.IsNotExist(err) {
		t.Fatalf("socket left: %v", err)
	}
}

func recordErr(r slog.Record) string {
	s := ""
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "err" {
			s = a.Value.String()
		}
		return true
	})
	return s
}

// onFirstRecord is a slog handler that runs fn on the first record.
type onFirstRecord struct {
	fn   func(slog.Record)
	done bool
}

func (h *onFirstRecord) Enabled(context.Context, slog.Level) bool { return true }
func (h *onFirstRecord) Handle(_ context.Context, r slog.Record) error {
	if !h.done {
		h.done = true
		h.fn(r)
	}
	return nil
}
func (h *onFirstRecord) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *onFirstRecord) WithGroup(string) slog.Handler      { return h }
