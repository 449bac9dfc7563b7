package main

import (
	"bufio"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/raspi-mcp/raspi-mcp/internal/deptest"
	"github.com/raspi-mcp/raspi-mcp/internal/handover"
)

// The point of this binary is to be small: the bridge and the standard
// library, nothing of the agent, the SDK or the store.
func TestLinksOnlyTheBridge(t *testing.T) {
	deptest.Fence{Packages: []string{"./cmd/raspi-mcp-stdio", "./bridge", "./internal/rpcid", "./internal/rawio", "./internal/handover", "./internal/fallback"}, StdlibOnly: true}.Check(t)
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

// An inherited connected socket is used: stdin and stdout, pipes, are
// handed over it, the agent answers on them, and the bridge ends when the
// agent closes the socket. Where stdin is a file, which cannot be handed
// over, the bridge copies instead.
func TestBridgesInheritedSocket(t *testing.T) {
	for _, tc := range []struct {
		name      string
		fileStdin bool
	}{{"handed over", false}, {"copied", true}} {
		t.Run(tc.name, func(t *testing.T) {
			sock := filepath.Join(t.TempDir(), "a.sock")
			l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			handed := make(chan bool, 1)
			go func() {
				c, err := l.AcceptUnix()
				if err != nil {
					return
				}
				defer c.Close()
				hello := []byte(`{"jsonrpc":"2.0","method":"notifications/hello"}` + "\n")
				pair, _, _ := handover.Receive(c, make([]byte, 512))
				handed <- pair != nil
				if pair != nil {
					syscall.Write(pair.Out, hello)
					pair.Close()
					return
				}
				// A copying bridge sent nothing and half-closed (its
				// stdin ended): the answer still goes back.
				c.Write(hello)
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
			if tc.fileStdin {
				if inR, err = os.Open(os.DevNull); err != nil {
					t.Fatal(err)
				}
			}
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
			if got := <-handed; got == tc.fileStdin {
				t.Errorf("handed over: %v, want %v", got, !tc.fileStdin)
			}
		})
	}
}
