// Package rawio reads and writes sockets and pipes with raw system calls,
// each descriptor waiting in epoll instances of its own, for processes that
// spend almost all their time waiting: the stdio bridge of every SSH session
// and the agent's end of those sessions. What it saves, and why, is below.
package rawio

import (
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"unsafe"
)

// Why the bridge (and the agent's end of its socket) does its own reads,
// writes and waits on Linux: it spends almost all of its time waiting and
// almost none working, so what a message costs it is mostly thread
// wake-ups.
//
//   - Go reads a blocking stdin by parking a thread in read(2); the
//     scheduler then hands that thread's processor to another thread and
//     wakes its monitor thread: a few wake-ups per message. So stdin and
//     stdout are made non-blocking, like sockets.
//   - Any system call made the ordinary way (os.File.Read, net.Conn.Write)
//     wakes the scheduler's monitor thread when it sleeps, which it does
//     whenever the process is idle: between every two messages here. The
//     reads and writes, which no longer block, are made with
//     syscall.RawSyscall, which leaves the scheduler out.
//   - The runtime's poller watches every descriptor for reading and writing
//     both, so it wakes the process each time the agent reads a request
//     (the socket has room again) though nothing waits to write. So each
//     descriptor is watched through epoll instances of its own, one that
//     watches it for reading only and one that watches it for writing only
//     while a write waits, and the runtime's poller watches those.
//
// What is left per message is the one wake-up its arrival needs. (Echoing
// lines that come 200 µs apart, as answers from the agent do, on a 2-core
// x86 VM: a blocking read takes 4.7 thread switches and 45 µs per line;
// the poller with ordinary system calls 3.3; the poller with raw ones 1.0
// and 15 µs. A loop around a blocking poll(2) is no better than the
// blocking read if made the ordinary way, and if made raw keeps the
// runtime from ever resting: 200 wake-ups a second while idle.)

// FD is a non-blocking descriptor read and written with raw system calls.
// One goroutine may read while another writes; writes must not overlap.
type FD struct {
	fd        int
	in        waiter // ready to read; watched from the first read on
	out       waiter // ready to write; watched only while a write waits
	closeOnce sync.Once
	closeErr  error
	reading   bool

	rbuf   []byte
	rn     int
	rerr   error
	readFn func(uintptr) bool // p.read, made once so a read allocates nothing

	wbuf    []byte
	wn      int
	werr    error
	armed   bool
	writeFn func(uintptr) bool
}

// waiter is an epoll instance, itself watched by the runtime's poller: it
// is readable when what it watches is ready.
type waiter struct {
	ep *os.File
	rc syscall.RawConn
}

func newWaiter() (waiter, error) {
	fd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return waiter{}, os.NewSyscallError("epoll_create1", err)
	}
	if err := syscall.SetNonblock(fd, true); err != nil {
		syscall.Close(fd)
		return waiter{}, err
	}
	ep := os.NewFile(uintptr(fd), "epoll") // non-blocking, so on the poller
	rc, err := ep.SyscallConn()
	if err != nil {
		ep.Close()
		return waiter{}, err
	}
	return waiter{ep: ep, rc: rc}, nil
}

func (w waiter) ctl(op, fd int, events uint32) error {
	var err error
	cerr := w.rc.Control(func(ep uintptr) {
		err = syscall.EpollCtl(int(ep), op, fd, &syscall.EpollEvent{Events: events, Fd: int32(fd)})
	})
	if cerr != nil {
		return net.ErrClosed
	}
	if err != nil {
		return os.NewSyscallError("epoll_ctl", err)
	}
	return nil
}

// New takes fd over: it is put in non-blocking mode and closed by Close.
func New(fd int) (*FD, error) {
	p := &FD{fd: fd}
	p.readFn, p.writeFn = p.read, p.write
	var err error
	if err = syscall.SetNonblock(fd, true); err == nil {
		if p.in, err = newWaiter(); err == nil {
			if p.out, err = newWaiter(); err == nil {
				return p, nil
			}
			p.in.ep.Close()
		}
	}
	syscall.Close(fd)
	return nil, err
}

func (p *FD) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	if !p.reading {
		// Only now: stdout, never read, may be the same socket as stdin.
		if err := p.in.ctl(syscall.EPOLL_CTL_ADD, p.fd, syscall.EPOLLIN|syscall.EPOLLRDHUP); err != nil {
			return 0, err
		}
		p.reading = true
	}
	p.rbuf, p.rn, p.rerr = b, 0, nil
	err := p.in.rc.Read(p.readFn)
	p.rbuf = nil
	switch {
	case err != nil:
		return 0, net.ErrClosed // the only way a wait ends in an error
	case p.rerr != nil:
		return 0, p.rerr
	case p.rn == 0:
		return 0, io.EOF
	}
	return p.rn, nil
}

// read reports whether it is done: false asks to wait.
func (p *FD) read(uintptr) bool {
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_READ, uintptr(p.fd), uintptr(unsafe.Pointer(&p.rbuf[0])), uintptr(len(p.rbuf)))
		switch e {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		case 0:
			p.rn = int(n)
		default:
			p.rerr = os.NewSyscallError("read", e)
		}
		return true
	}
}

func (p *FD) Write(b []byte) (int, error) {
	p.wbuf, p.wn, p.werr = b, 0, nil
	// Through out's lock even when no wait is needed, so Close never
	// closes fd under a write.
	err := p.out.rc.Read(p.writeFn)
	p.wbuf = nil
	if err != nil {
		return p.wn, net.ErrClosed
	}
	return p.wn, p.werr
}

// write reports whether it is done: false asks to wait until the peer has
// read. out watches fd only from the first such wait to the end of the
// write, so the peer's every read does not wake this process.
func (p *FD) write(uintptr) bool {
	for p.wn < len(p.wbuf) {
		n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, uintptr(p.fd), uintptr(unsafe.Pointer(&p.wbuf[p.wn])), uintptr(len(p.wbuf)-p.wn))
		switch e {
		case 0:
			p.wn += int(n)
			continue
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			if p.armed {
				return false
			}
			if err := p.out.ctl(syscall.EPOLL_CTL_ADD, p.fd, syscall.EPOLLOUT); err != nil {
				p.werr = err
				return true
			}
			p.armed = true // and try again: the peer may have read meanwhile
			continue
		}
		p.werr = os.NewSyscallError("write", e)
		break
	}
	if p.armed {
		_ = p.out.ctl(syscall.EPOLL_CTL_DEL, p.fd, 0)
		p.armed = false
	}
	return true
}

// CloseWrite ends the stream towards the peer (a socket's half-close). It
// must not be called after Close.
func (p *FD) CloseWrite() error { return syscall.Shutdown(p.fd, syscall.SHUT_WR) }

// Close wakes a read or write that waits, with net.ErrClosed, waits for
// one under way, and closes fd, once: fd's number may be reused after.
func (p *FD) Close() error {
	p.closeOnce.Do(func() {
		p.in.ep.Close()
		p.out.ep.Close()
		p.closeErr = syscall.Close(p.fd)
	})
	return p.closeErr
}

// Conn is a connected socket as rawio's users need it.
type Conn interface {
	io.ReadWriteCloser
	CloseWrite() error
}

// TakeUnix takes conn over (its owner may still Close it, to no effect):
// its descriptor, duplicated, leaves the runtime's poller, which would wake
// the process each time the peer reads. Where that cannot be done it
// returns conn itself.
func TakeUnix(conn *net.UnixConn) Conn {
	sc, err := conn.SyscallConn()
	if err != nil {
		return conn
	}
	fd := -1
	if err := sc.Control(func(orig uintptr) { fd, _ = fcntl(int(orig), syscall.F_DUPFD_CLOEXEC, 0) }); err != nil || fd < 0 {
		return conn
	}
	p, err := New(fd)
	if err != nil {
		return conn
	}
	conn.Close()
	return p
}

// Stdio returns a reader or writer for f that waits as above, a
// function that closes it and one that puts f's mode back, to be called
// after. For anything but a pipe or a socket (a terminal, a file,
// /dev/null) it returns f and changes nothing.
//
// Non-blocking mode belongs to the open file, which f may share with other
// processes: with its parent for a terminal, which is why those are left
// alone. A pipe's or a socket's end is, in practice, this session's alone
// (made by sshd or an MCP client for this process); its mode is still put
// back by restore.
func Stdio(f *os.File) (rw io.ReadWriter, close, restore func()) {
	nop := func() {}
	sc, err := f.SyscallConn() // not f.Fd(), which may change the mode
	if err != nil {
		return f, nop, nop
	}
	fd, was := -1, false
	_ = sc.Control(func(orig uintptr) {
		var st syscall.Stat_t
		if syscall.Fstat(int(orig), &st) != nil {
			return
		}
		if t := st.Mode & syscall.S_IFMT; t != syscall.S_IFIFO && t != syscall.S_IFSOCK {
			return
		}
		fl, err := fcntl(int(orig), syscall.F_GETFL, 0)
		if err != nil {
			return
		}
		was = fl&syscall.O_NONBLOCK != 0
		// A duplicate of our own, so that closing it leaves f open.
		fd, _ = fcntl(int(orig), syscall.F_DUPFD_CLOEXEC, 0)
	})
	if fd < 0 {
		return f, nop, nop
	}
	p, err := New(fd)
	if err != nil {
		return f, nop, nop
	}
	return p, func() { p.Close() }, func() {
		if !was {
			_ = sc.Control(func(orig uintptr) { _ = syscall.SetNonblock(int(orig), false) })
		}
	}
}

func fcntl(fd, cmd, arg int) (int, error) {
	r1, _, e := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), uintptr(cmd), uintptr(arg))
	if e != 0 {
		return -1, e
	}
	return int(r1), nil
}

// Take takes fd, a pipe or a socket, over as a Conn (an FD).
func Take(fd int) (Conn, error) { return New(fd) }
