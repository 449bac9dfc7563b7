//go:build linux

package handover

import (
	"errors"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
)

// socketPair is a connected pair of Unix stream sockets, as the agent
// socket gives the bridge and the agent.
func socketPair(t *testing.T) (sender, receiver *net.UnixConn) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "sock")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c.(*net.UnixConn)
	}
	return conn(fds[0]), conn(fds[1])
}

func pipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

// openFDs counts this process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// The descriptors arrive and carry the session: what the client writes to
// its end of stdin is read from In, what is written to Out reaches the
// client, and the received descriptors are close-on-exec.
func TestSendReceive(t *testing.T) {
	s, r := socketPair(t)
	inR, inW := pipe(t)   // the client writes requests to inW
	outR, outW := pipe(t) // and reads answers from outR
	if !Fits(inR) || !Fits(outW) {
		t.Fatal("pipes do not fit")
	}
	if err := Send(s, inR, outW); err != nil {
		t.Fatal(err)
	}
	pair, first, err := Receive(r, make([]byte, 512))
	if err != nil || pair == nil || len(first) != 0 {
		t.Fatalf("Receive = %v, %q, %v", pair, first, err)
	}
	defer pair.Close()
	for _, fd := range []int{pair.In, pair.Out} {
		fl, _, e := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_GETFD, 0)
		if e != 0 || fl&syscall.FD_CLOEXEC == 0 {
			t.Errorf("descriptor %d: flags %#x, %v: not close-on-exec", fd, fl, e)
		}
	}
	if _, err := inW.WriteString("request\n"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, err := syscall.Read(pair.In, buf)
	if err != nil || string(buf[:n]) != "request\n" {
		t.Fatalf("read from In: %q, %v", buf[:n], err)
	}
	if _, err := syscall.Write(pair.Out, []byte("answer\n")); err != nil {
		t.Fatal(err)
	}
	n, err = outR.Read(buf)
	if err != nil || string(buf[:n]) != "answer\n" {
		t.Fatalf("read from the client's end: %q, %v", buf[:n], err)
	}
}

// An ordinary MCP stream is no handover: its first bytes come back to be
// read again, and nothing else changes.
func TestReceivePlainStream(t *testing.T) {
	s, r := socketPair(t)
	line := `{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n"
	if _, err := s.Write([]byte(line)); err != nil {
		t.Fatal(err)
	}
	pair, first, err := Receive(r, make([]byte, 512))
	if err != nil || pair != nil || string(first) != line {
		t.Fatalf("Receive = %v, %q, %v", pair, first, err)
	}
	// A NUL byte without descriptors is garbage for go-sdk to refuse, not
	// a handover.
	s, r = socketPair(t)
	if _, err := s.Write([]byte("\x00garbage\n")); err != nil {
		t.Fatal(err)
	}
	if pair, first, err := Receive(r, make([]byte, 512)); err != nil || pair != nil || string(first) != "\x00garbage\n" {
		t.Fatalf("Receive = %v, %q, %v", pair, first, err)
	}
}

// Whatever does not fit is refused with a reason, changes nothing, and
// every descriptor that came along is closed again.
func TestReceiveRefuses(t *testing.T) {
	inR, inW := pipe(t)
	outR, outW := pipe(t)
	file, err := os.CreateTemp(t.TempDir(), "f")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	fd := func(f *os.File) int { return int(f.Fd()) }
	for _, tc := range []struct {
		name, header string
		fds          []int
		why          string
	}{
		{"no descriptors", Header, nil, "0 descriptors"},
		{"one", Header, []int{fd(inR)}, "1 descriptors"},
		{"three", Header, []int{fd(inR), fd(outW), fd(outW)}, "3 descriptors"},
		{"more than there is room for", Header, []int{fd(inR), fd(outW), fd(outW), fd(outW), fd(outW), fd(outW)}, "descriptors, want 2"},
		{"another header", "\x00raspi-mcp handover 2\n", []int{fd(inR), fd(outW)}, "header"},
		{"a request with descriptors", `{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n", []int{fd(inR), fd(outW)}, "header"},
		{"stdin a file", Header, []int{fd(file), fd(outW)}, "stdin: not a pipe or a socket"},
		{"stdout a device", Header, []int{fd(inR), fd(null)}, "stdout: not a pipe or a socket"},
		{"stdin the write end", Header, []int{fd(inW), fd(outW)}, "stdin: not open for reading"},
		{"stdout the read end", Header, []int{fd(inR), fd(outR)}, "stdout: not open for writing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, r := socketPair(t)
			var oob []byte
			if tc.fds != nil {
				oob = syscall.UnixRights(tc.fds...)
			}
			if _, _, err := s.WriteMsgUnix([]byte(tc.header), oob, nil); err != nil {
				t.Fatal(err)
			}
			before := openFDs(t)
			pair, first, err := Receive(r, make([]byte, 512))
			if !errors.Is(err, ErrRefused) || pair != nil || first != nil || !strings.Contains(err.Error(), tc.why) {
				t.Fatalf("Receive = %v, %q, %v; want a refusal saying %q", pair, first, err, tc.why)
			}
			if after := openFDs(t); after != before {
				t.Errorf("%d descriptors open after the refusal, %d before: the received ones leaked", after, before)
			}
		})
	}
}

// A terminal or a file is not handed over; the sender's modes come back as
// they were once the receiver has made its copies non-blocking.
func TestFitsAndKeepMode(t *testing.T) {
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	if Fits(null) {
		t.Error("/dev/null fits")
	}
	r, _ := pipe(t)
	restore := KeepMode(r)
	sc, err := r.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	nonblock := func() bool {
		var fl int
		_ = sc.Control(func(fd uintptr) { fl, _ = getfl(int(fd)) })
		return fl&syscall.O_NONBLOCK != 0
	}
	was := nonblock()
	_ = sc.Control(func(fd uintptr) { _ = syscall.SetNonblock(int(fd), !was) })
	if nonblock() == was {
		t.Fatal("the mode did not change: the check below would prove nothing")
	}
	restore()
	if nonblock() != was {
		t.Errorf("non-blocking %v after restore, want %v", !was, was)
	}
}
