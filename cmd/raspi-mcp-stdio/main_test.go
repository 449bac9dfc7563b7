package main

import (
	"bufio"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/raspi-mcp/raspi-mcp/internal/deptest"
)

// The point of this binary is to be small: the bridge and the standard
// library, nothing of the agent, the SDK or the store.
func TestLinksOnlyTheBridge(t *testing.T) {
	deptest.Fence{Packages: []string{"./cmd/raspi-mcp-stdio", "./bridge", "./internal/rpcid", "./internal/rawio"}, StdlibOnly: true}.Check(t)
}

func TestBadArguments(t *testing.T) {
	for _, args := range [][]string{nil, {"1", "2"}, {"x"}, {"1"}} {
		if err := run(args); err == nil {
			t.Errorf("run(%q) succeeded", args)
		}
	}
	f, err := os.CreateTemp(t.TempDir(), "f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := run([]string{strconv.Itoa(int(f.Fd()))}); err == nil || !strings.Contains(err.Error(), "file descriptor") {
		t.Errorf("a regular file as the agent socket: %v", err)
	}
}

// An inherited connected socket is bridged: a line from the agent reaches
// stdout, and the bridge ends when the agent closes.
func TestBridgesInheritedSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "a.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		c.Write([]byte(`{"jsonrpc":"2.0","method":"notifications/hello"}` + "\n"))
		c.Close()
	}()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	f, err := c.(*net.UnixConn).File()
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	// run takes the descriptor over and closes it, as the exec'd binary does.
	fd := f.Fd()

	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer inW.Close()
	stdin, stdout := os.Stdin, os.Stdout
	os.Stdin, os.Stdout = inR, outW
	err = run([]string{strconv.Itoa(int(fd))})
	os.Stdin, os.Stdout = stdin, stdout
	outW.Close()
	if err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(outR).ReadString('\n')
	if !strings.Contains(line, "notifications/hello") {
		t.Fatalf("stdout = %q", line)
	}
}
