//go:build unix

// Package handover lets `raspi-mcp stdio` hand its stdin and stdout to the
// agent over the agent socket (SCM_RIGHTS), so that the agent reads requests
// from the SSH session's pipes and writes answers into them itself, and the
// per-session process only waits for the session to end.
//
// Why: a byte bridge wakes for every message in both directions and copies
// it; on a Pi Zero that was a fifth of the agent's own CPU per call. After a
// handover the bridge costs nothing per message. OpenSSH's connection
// multiplexing hands a session's descriptors to its master the same way.
//
// The rules that keep it safe: the principal is still the peer credentials
// of the socket the descriptors came over (the caller's own, read by the
// kernel); the agent takes exactly two descriptors, each a pipe or a socket
// open for the direction it is used in, and closes whatever else arrives;
// nothing it receives is ever run, opened or seeked, only read or written
// as the session's byte stream, which the caller could have sent anyway.
//
// On the wire: the first message on a fresh connection is Header with the
// two descriptors attached (stdin first). Any other first bytes are an
// ordinary MCP stream. The agent never answers on the socket: it serves
// the session on the descriptors and closes the socket when the session
// ends, or writes one line saying why it refused and then closes it. The
// caller keeps the socket open for the life of the session: its closing
// (the caller killed) ends the session too.
package handover

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
)

// Header opens a handover. No MCP stream can start with a NUL byte.
const Header = "\x00raspi-mcp handover 1\n"

// Pair is the two descriptors of a handed-over session.
type Pair struct {
	In, Out int // read requests from In, write answers to Out
}

// Close closes both descriptors.
func (p Pair) Close() {
	syscall.Close(p.In)
	syscall.Close(p.Out)
}

// Fits reports whether f can be handed over: a pipe or a socket. A terminal
// or a file is not (their modes are shared with other processes, and a
// file cannot be waited on).
func Fits(f *os.File) bool {
	ok := false
	_ = control(f, func(fd int) { ok = streamType(fd) == nil })
	return ok
}

// Send hands in and out over conn.
func Send(conn *net.UnixConn, in, out *os.File) error {
	var werr, oerr error
	ierr := control(in, func(ifd int) {
		oerr = control(out, func(ofd int) {
			_, _, werr = conn.WriteMsgUnix([]byte(Header), syscall.UnixRights(ifd, ofd), nil)
		})
	})
	if err := cmp.Or(werr, oerr, ierr); err != nil {
		return fmt.Errorf("handover: send: %w", err)
	}
	return nil
}

func control(f *os.File, fn func(fd int)) error {
	sc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	return sc.Control(func(fd uintptr) { fn(int(fd)) })
}

// ErrRefused wraps every reason a handover is not taken.
var ErrRefused = errors.New("handover: refused")

// Receive reads the first message of conn into buf, which must hold Header.
// A handover (Header, or any message with descriptors attached) gives its
// descriptors (close-on-exec, checked as the package comment says) and no
// bytes; any other stream gives the bytes read, to be read again before the
// rest of conn, and pair is nil. An error that wraps ErrRefused is a
// handover that was not taken: its descriptors are closed already.
func Receive(conn *net.UnixConn, buf []byte) (pair *Pair, first []byte, err error) {
	oob := make([]byte, syscall.CmsgSpace(4*4)) // room to see that more than two came
	n, oobn, flags, _, err := conn.ReadMsgUnix(buf, oob)
	// On an error (a read deadline, the connection closed under it) the
	// counts may be -1.
	n, oobn = max(n, 0), max(oobn, 0)
	fds, ferr := rights(oob[:oobn])
	if err != nil {
		closeAll(fds)
		return nil, buf[:n], err
	}
	// A handover is the header, or anything that brings descriptors.
	if oobn == 0 && string(buf[:n]) != Header {
		return nil, buf[:n], nil
	}
	refuse := func(why string, args ...any) (*Pair, []byte, error) {
		closeAll(fds)
		return nil, nil, fmt.Errorf("%w: %s", ErrRefused, fmt.Sprintf(why, args...))
	}
	switch {
	case string(buf[:n]) != Header:
		return refuse("header %q, want %q", buf[:n], Header)
	case ferr != nil:
		return refuse("%v", ferr)
	case flags&syscall.MSG_CTRUNC != 0 || len(fds) != 2:
		return refuse("%d descriptors, want 2 (stdin, stdout)", len(fds))
	}
	if err := check(fds[0], syscall.O_RDONLY); err != nil {
		return refuse("stdin: %v", err)
	}
	if err := check(fds[1], syscall.O_WRONLY); err != nil {
		return refuse("stdout: %v", err)
	}
	return &Pair{In: fds[0], Out: fds[1]}, nil, nil
}

func rights(oob []byte) ([]int, error) {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var fds []int
	for _, m := range msgs {
		if m.Header.Level != syscall.SOL_SOCKET || m.Header.Type != syscall.SCM_RIGHTS {
			continue
		}
		got, err := syscall.ParseUnixRights(&m)
		if err != nil {
			return fds, err
		}
		fds = append(fds, got...)
	}
	return fds, nil
}

func closeAll(fds []int) {
	for _, fd := range fds {
		syscall.Close(fd)
	}
}

// check says why fd cannot serve as a stream in direction dir (O_RDONLY:
// read from, O_WRONLY: written to).
func check(fd, dir int) error {
	if err := streamType(fd); err != nil {
		return err
	}
	fl, err := getfl(fd)
	if err != nil {
		return err
	}
	if acc := fl & syscall.O_ACCMODE; acc != dir && acc != syscall.O_RDWR {
		want := "reading"
		if dir == syscall.O_WRONLY {
			want = "writing"
		}
		return fmt.Errorf("not open for %s", want)
	}
	return nil
}

func streamType(fd int) error {
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return os.NewSyscallError("fstat", err)
	}
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFIFO, syscall.S_IFSOCK:
		return nil
	}
	return fmt.Errorf("not a pipe or a socket (mode %#o)", st.Mode&syscall.S_IFMT)
}

// KeepMode returns a function that puts f's file status flags back as they
// are now. The receiver of a handover makes the descriptors non-blocking, a
// mode that belongs to the open file and so reaches the sender's too.
func KeepMode(f *os.File) func() {
	fl := -1
	_ = control(f, func(fd int) { fl, _ = getfl(fd) })
	if fl < 0 {
		return func() {}
	}
	return func() {
		_ = control(f, func(fd int) {
			_, _, _ = syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_SETFL, uintptr(fl))
		})
	}
}

func getfl(fd int) (int, error) {
	r, _, e := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_GETFL, 0)
	if e != 0 {
		return -1, os.NewSyscallError("fcntl", e)
	}
	return int(r), nil
}
