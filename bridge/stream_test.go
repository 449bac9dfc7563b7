package bridge

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// hangGuard bounds waits that only a broken bridge makes long.
const hangGuard = 2 * time.Minute

// sockPair is a connected Unix socket pair: the bridge's end and the
// agent's.
func sockPair(t testing.TB) (bridgeEnd, agentEnd *net.UnixConn) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "a.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	bridgeEnd, err = net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	agentEnd, err = ln.AcceptUnix()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bridgeEnd.Close(); agentEnd.Close() })
	return bridgeEnd, agentEnd
}

// stdio is the client's side of a bridge: it writes the bridge's stdin (w)
// and reads its stdout (r).
type stdio struct {
	in  io.Reader // given to Run
	out io.Writer // given to Run
	w   io.WriteCloser
	r   io.Reader
}

// clients are the kinds of stdin/stdout Run is given: operating-system
// pipes or a socket (what an SSH session or an MCP client hands the bridge,
// which it reads and writes without blocking) and Go readers and writers
// (taken as they are).
var clients = []struct {
	name string
	make func(t testing.TB) stdio
}{
	{"os-pipes", func(t testing.TB) stdio {
		inR, inW, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		outR, outW, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { inR.Close(); inW.Close(); outR.Close(); outW.Close() })
		return stdio{in: inR, out: outW, w: inW, r: outR}
	}},
	{"one-socket", func(t testing.TB) stdio {
		// stdin and stdout one socket, as sshd may hand them over.
		fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
		if err != nil {
			t.Fatal(err)
		}
		ours := os.NewFile(uintptr(fds[0]), "stdio")
		theirs := os.NewFile(uintptr(fds[1]), "client")
		c, err := net.FileConn(theirs)
		theirs.Close()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ours.Close(); c.Close() })
		return stdio{in: ours, out: ours, w: halfCloser{c.(*net.UnixConn)}, r: c}
	}},
	{"io-pipes", func(t testing.TB) stdio {
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		t.Cleanup(func() { inR.Close(); inW.Close(); outR.Close(); outW.Close() })
		return stdio{in: inR, out: outW, w: inW, r: outR}
	}},
}

// halfCloser ends the client's stream to the bridge, and only that.
type halfCloser struct{ *net.UnixConn }

func (h halfCloser) Close() error { return h.CloseWrite() }

// runBridge starts Run; stdout is closed when Run returns, so a reader of
// s.r sees EOF.
func runBridge(s stdio, conn *net.UnixConn, grace time.Duration) <-chan error {
	done := make(chan error, 1)
	go func() {
		err := Run(s.in, s.out, conn, grace)
		if c, ok := s.out.(io.Closer); ok {
			c.Close()
		}
		done <- err
	}()
	return done
}

func wait(t *testing.T, what string, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(hangGuard):
		t.Fatalf("%s: still waiting after %v", what, hangGuard)
		return nil
	}
}

// bigLine is a notification of n bytes, newline included.
func bigLine(tag string, n int) []byte {
	head := `{"jsonrpc":"2.0","method":"notifications/` + tag + `","params":{"pad":"`
	tail := `"}}` + "\n"
	return []byte(head + strings.Repeat("x", n-len(head)-len(tail)) + tail)
}

// Both peers write a big message at once and read only once it is written:
// the bridge must keep reading each side while the other is full, or both
// wait for ever.
func TestBigMessagesCrossing(t *testing.T) {
	for _, c := range clients {
		t.Run(c.name, func(t *testing.T) {
			conn, agent := sockPair(t)
			s := c.make(t)
			done := runBridge(s, conn, time.Minute)

			up, down := bigLine("up", 1<<20), bigLine("down", 1<<20)
			agentGot, agentDone := make(chan []byte, 1), make(chan error, 1)
			go func() {
				if _, err := agent.Write(down); err != nil {
					agentDone <- err
					return
				}
				br := bufio.NewReader(agent)
				line, err := br.ReadBytes('\n')
				agentGot <- line
				if err == nil {
					// The session ends from the client's side: the bridge
					// half-closes once stdin is done, then the agent closes.
					_, err = io.Copy(io.Discard, br)
				}
				agent.Close()
				agentDone <- err
			}()
			clientGot, clientDone := make(chan []byte, 1), make(chan error, 1)
			go func() {
				if _, err := s.w.Write(up); err != nil {
					clientDone <- err
					return
				}
				line, err := bufio.NewReader(s.r).ReadBytes('\n')
				clientGot <- line
				s.w.Close()
				clientDone <- err
			}()
			if err := wait(t, "client", clientDone); err != nil {
				t.Fatalf("client: %v", err)
			}
			if err := wait(t, "agent", agentDone); err != nil {
				t.Fatalf("agent: %v", err)
			}
			if got := <-agentGot; !bytes.Equal(got, up) {
				t.Errorf("the agent got %d bytes, want the client's %d", len(got), len(up))
			}
			if got := <-clientGot; !bytes.Equal(got, down) {
				t.Errorf("the client got %d bytes, want the agent's %d", len(got), len(down))
			}
			if err := wait(t, "Run", done); err != nil {
				t.Fatalf("Run: %v", err)
			}
		})
	}
}

// A message written in pieces reaches the agent whole and once; blank lines
// are dropped; a last line without a newline gets one; and the answers
// owed when stdin ends are still delivered.
func TestPartialLinesAndOwedAnswers(t *testing.T) {
	for _, c := range clients {
		t.Run(c.name, func(t *testing.T) {
			conn, agent := sockPair(t)
			s := c.make(t)
			done := runBridge(s, conn, 10*time.Minute)

			var got []string
			agentDone := make(chan error, 1)
			go func() {
				// The agent answers only once it has all three lines, i.e.
				// after the client's stdin has ended, which go-sdk would
				// not: the bridge must still wait for the answers.
				br := bufio.NewReader(agent)
				for len(got) < 3 {
					line, err := br.ReadString('\n')
					if err != nil {
						agentDone <- err
						return
					}
					got = append(got, line)
				}
				for _, id := range []string{`7`, `"eight"`} {
					if _, err := agent.Write([]byte(`{"jsonrpc":"2.0","id":` + id + `,"result":{}}` + "\n")); err != nil {
						agentDone <- err
						return
					}
				}
				_, err := io.Copy(io.Discard, br) // until the bridge half-closes
				agent.Close()
				agentDone <- err
			}()
			outDone := make(chan []byte, 1)
			go func() { b, _ := io.ReadAll(s.r); outDone <- b }()

			pieces := []string{
				`{"jsonrpc":"2.0",`, `"id":7,"method":"tools/list"`, "}\n\n  \n",
				`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" + `{"jsonrpc":"2.0","id":"eight",`,
				`"method":"ping"}`,
			}
			for _, p := range pieces {
				if _, err := io.WriteString(s.w, p); err != nil {
					t.Fatal(err)
				}
				// Lets each piece be read on its own, most of the time; the
				// outcome is the same either way.
				time.Sleep(10 * time.Millisecond)
			}
			s.w.Close()
			if err := wait(t, "Run", done); err != nil {
				t.Fatalf("Run: %v", err)
			}
			if err := wait(t, "agent", agentDone); err != nil {
				t.Fatalf("agent: %v", err)
			}
			want := []string{
				`{"jsonrpc":"2.0","id":7,"method":"tools/list"}` + "\n",
				`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n",
				`{"jsonrpc":"2.0","id":"eight","method":"ping"}` + "\n",
			}
			if strings.Join(got, "") != strings.Join(want, "") {
				t.Errorf("the agent got %q, want %q", got, want)
			}
			want = []string{`{"jsonrpc":"2.0","id":7,"result":{}}` + "\n", `{"jsonrpc":"2.0","id":"eight","result":{}}` + "\n"}
			if out := string(<-outDone); out != strings.Join(want, "") {
				t.Errorf("stdout = %q, want %q", out, want)
			}
		})
	}
}

// A line of MaxLine bytes, newline included, goes through; one byte more
// is an error, and nothing of it reaches the agent.
func TestLongLines(t *testing.T) {
	for _, c := range clients {
		for _, tc := range []struct {
			n  int
			ok bool
		}{{MaxLine, true}, {MaxLine + 1, false}} {
			t.Run(c.name, func(t *testing.T) {
				conn, agent := sockPair(t)
				s := c.make(t)
				done := runBridge(s, conn, time.Minute)
				line := bigLine("long", tc.n)
				agentGot := make(chan []byte, 1)
				go func() { b, _ := io.ReadAll(agent); agent.Close(); agentGot <- b }()
				go io.Copy(io.Discard, s.r)
				writeDone := make(chan error, 1)
				go func() {
					_, err := s.w.Write(line)
					s.w.Close()
					writeDone <- err
				}()
				err := wait(t, "Run", done)
				if tc.ok {
					if err != nil {
						t.Fatalf("%d bytes: %v", tc.n, err)
					}
					if got := <-agentGot; !bytes.Equal(got, line) {
						t.Fatalf("%d bytes: the agent got %d", tc.n, len(got))
					}
					return
				}
				if err == nil || !strings.Contains(err.Error(), "longer than") {
					t.Fatalf("%d bytes: Run = %v, want a too-long error", tc.n, err)
				}
				if got := <-agentGot; len(got) != 0 {
					t.Fatalf("%d bytes: the agent got %d bytes of a refused line", tc.n, len(got))
				}
				// The client's write ends once nobody reads stdin any more.
				if c, ok := s.in.(io.Closer); ok {
					c.Close()
				}
				_ = wait(t, "client write", writeDone)
			})
		}
	}
}

// writes records each Write on its own.
type writes struct{ got []string }

func (w *writes) Write(p []byte) (int, error) { w.got = append(w.got, string(p)); return len(p), nil }

// chunks hands out one string per Read, as a pipe hands out what was
// written at once.
type chunks struct{ left []string }

func (c *chunks) Read(p []byte) (int, error) {
	if len(c.left) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.left[0])
	if c.left[0] = c.left[0][n:]; c.left[0] == "" {
		c.left = c.left[1:]
	}
	return n, nil
}

// Lines that arrive together leave together, in one write, copied from
// where they were read; a line split over reads leaves once whole.
func TestLinesReadTogetherAreWrittenTogether(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want []string
	}{
		{[]string{"{\"a\":1}\n{\"b\":2}\n{\"c\":3}\n"}, []string{"{\"a\":1}\n{\"b\":2}\n{\"c\":3}\n"}},
		// A blank line in between is dropped, so what is around it is two runs.
		{[]string{"{\"a\":1}\n\n{\"b\":2}\n"}, []string{"{\"a\":1}\n", "{\"b\":2}\n"}},
		{[]string{"{\"a\":", "1}\n{\"b\"", ":2}\n"}, []string{"{\"a\":1}\n", "{\"b\":2}\n"}},
		// The last line, without its newline, is written with one, once
		// the end is known: after the next read, before which what is
		// whole has been written.
		{[]string{"{\"a\":1}\n{\"b\":2}"}, []string{"{\"a\":1}\n", "{\"b\":2}\n"}},
	} {
		var w writes
		var seen []string
		if err := copyLines(&chunks{left: slices.Clone(tc.in)}, &w, func(l []byte) { seen = append(seen, string(l)) }); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(w.got, tc.want) {
			t.Errorf("%q: writes %q, want %q", tc.in, w.got, tc.want)
		}
		if strings.Join(seen, "") != strings.Join(tc.want, "") {
			t.Errorf("%q: lines seen %q", tc.in, seen)
		}
	}
}
