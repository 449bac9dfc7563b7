package bridge

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Regular files as stdin and stdout (`raspi-mcp stdio <requests >answers`)
// are read and written the ordinary way, with the same outcome.
func TestRegularFiles(t *testing.T) {
	conn, stop := fakeAgent(t, 10*time.Millisecond)
	defer stop()
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	if err := os.WriteFile(in, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`+"\n"+`{"jsonrpc":"2.0","id":2,"method":"ping"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	stdin, err := os.Open(in)
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := os.Create(filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer stdout.Close()
	if err := Run(stdin, stdout, conn, time.Minute); err != nil {
		t.Fatal(err)
	}
	out, err := os.ReadFile(stdout.Name())
	if err != nil {
		t.Fatal(err)
	}
	if got := string(out); strings.Count(got, "\n") != 2 || !strings.Contains(got, `"id":1,`) || !strings.Contains(got, `"id":2,`) {
		t.Fatalf("stdout = %q", got)
	}
}
