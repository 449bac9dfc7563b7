//go:build linux

package e2e

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

const initLine = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}` + "\n"

// stdioSession starts `raspi-mcp stdio` (the binary raspi), completes the
// handshake, and returns the executable its process runs once it answers.
func stdioSession(t *testing.T, raspi, dir string) string {
	t.Helper()
	cmd := exec.Command(raspi, "stdio", "--dir", dir)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	defer func() {
		in.Close()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("stdio: %v", err)
			}
		case <-time.After(hangGuard):
			_ = cmd.Process.Kill()
			t.Error("stdio did not exit after stdin closed")
		}
	}()
	if _, err := io.WriteString(in, initLine); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.Contains(line, `"id":1`) || !strings.Contains(line, `"result"`) {
		t.Fatalf("initialize answer %q, %v", line, err)
	}
	exe, err := os.Readlink("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/exe")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, out); done <- cmd.Wait() }()
	return exe
}

// With raspi-mcp-stdio beside it, a session's process becomes that small
// binary once connected; without it, raspi-mcp bridges by itself.
func TestStdioExecsSmallBridge(t *testing.T) {
	s := startSim(t)
	if exe := stdioSession(t, raspi(), s.dir); filepath.Base(exe) != "raspi-mcp-stdio" {
		t.Fatalf("the session runs %s, want raspi-mcp-stdio", exe)
	}

	alone := filepath.Join(t.TempDir(), "raspi-mcp")
	data, err := os.ReadFile(raspi())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(alone, data, 0o755); err != nil {
		t.Fatal(err)
	}
	if exe := stdioSession(t, alone, s.dir); exe != alone {
		t.Fatalf("without raspi-mcp-stdio the session runs %s, want %s", exe, alone)
	}
}
