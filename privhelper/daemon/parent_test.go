package daemon

import (
	"bufio"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

const orphanChild = "RASPI_MCP_HELPER_ORPHAN_CHILD"

// TestStopWithParent starts this test binary under a shell that exits once
// the child is watching: the re-parented child must stop by itself.
func TestStopWithParent(t *testing.T) {
	if os.Getenv(orphanChild) != "" {
		ctx, stop := context.WithCancel(context.Background())
		go stopWithParent(ctx, os.Getppid(), stop, slog.New(slog.DiscardHandler))
		os.Stdout.WriteString("watching\n")
		select {
		case <-ctx.Done():
			os.Stdout.WriteString("stopped\n")
		case <-time.After(60 * time.Second):
			os.Stdout.WriteString("still running\n")
		}
		return
	}
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	// The shell starts the child in the background, waits until the test
	// closes its stdin, then exits, leaving the child an orphan.
	sh := exec.Command("sh", "-c", `"$0" -test.run='^TestStopWithParent$' -test.count=1 </dev/null & read x || true`, os.Args[0])
	sh.Env = append(os.Environ(), orphanChild+"=1")
	in, err := sh.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	// A plain pipe, not StdoutPipe: the child keeps writing to it after the
	// shell has been waited for.
	out, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	sh.Stdout = w
	err = sh.Start()
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	out.SetReadDeadline(time.Now().Add(60 * time.Second)) // hang guard
	lines := bufio.NewScanner(out)                        // the child inherits the shell's stdout
	var said []string
	for lines.Scan() {
		said = append(said, lines.Text())
		if lines.Text() == "watching" {
			in.Close() // the shell exits; the child is re-parented
			if err := sh.Wait(); err != nil {
				t.Fatalf("sh: %v", err)
			}
		}
	}
	if !strings.Contains(strings.Join(said, "\n"), "stopped") {
		t.Fatalf("the orphaned child did not stop; it said %q", said)
	}
}
