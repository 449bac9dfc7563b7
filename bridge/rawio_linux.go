package bridge

import (
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"
)

// Why the bridge does its own reads and writes on Linux: it spends almost
// all of its time waiting and almost none working, so what a call costs it
// is mostly thread wake-ups. Go reads a blocking stdin by parking a thread
// in read(2); the scheduler then hands that thread's processor to another
// thread and wakes its monitor thread, a few wake-ups per message. And any
// system call made the ordinary way (syscall.Read, os.File.Read) wakes the
// monitor thread when it sleeps, which it does whenever the process is
// idle, i.e. between every two messages here. So stdin and stdout are made
// non-blocking and wait in the runtime's poller, like sockets, and the
// reads and writes themselves, which no longer block, are made with
// syscall.RawSyscall, which leaves the scheduler out. What is left per
// message is the one wake-up the poller needs.

// rawFD reads and writes a non-blocking descriptor held by rc.
type rawFD struct{ rc syscall.RawConn }

func (r rawFD) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var (
		n     int
		errno syscall.Errno
	)
	err := r.rc.Read(func(fd uintptr) bool {
		for {
			r1, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
			switch e {
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false // wait in the poller
			case 0:
				n = int(r1)
			default:
				errno = e
			}
			return true
		}
	})
	switch {
	case err != nil:
		return 0, err
	case errno != 0:
		return 0, os.NewSyscallError("read", errno)
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

func (r rawFD) Write(p []byte) (int, error) {
	var (
		n     int
		errno syscall.Errno
	)
	err := r.rc.Write(func(fd uintptr) bool {
		for n < len(p) {
			r1, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&p[n])), uintptr(len(p)-n))
			switch e {
			case 0:
				n += int(r1)
			case syscall.EINTR:
			case syscall.EAGAIN:
				return false // the peer is behind: wait until it reads
			default:
				errno = e
				return true
			}
		}
		return true
	})
	if err == nil && errno != 0 {
		err = os.NewSyscallError("write", errno)
	}
	return n, err
}

// rawConn is conn read and written through rawFD, or conn itself if its
// descriptor cannot be had.
func rawConn(conn *net.UnixConn) io.ReadWriter {
	rc, err := conn.SyscallConn()
	if err != nil {
		return conn
	}
	return rawFD{rc}
}

// pollStdio returns a reader or writer for f that waits in the runtime's
// poller, and a function that undoes what it changed; for anything but a
// pipe or a socket (a terminal, a file, /dev/null) it returns f and
// changes nothing.
//
// Non-blocking mode belongs to the open file, which f may share with
// other processes: with its parent for a terminal, which is why those are
// left alone. A pipe's or a socket's end is, in practice, this session's
// alone (made by sshd or an MCP client for this process); its mode is
// still put back when Run returns.
func pollStdio(f *os.File) (rw io.ReadWriter, undo func()) {
	nop := func() {}
	sc, err := f.SyscallConn() // not f.Fd(), which may change the mode
	if err != nil {
		return f, nop
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
		return f, nop
	}
	if syscall.SetNonblock(fd, true) != nil {
		syscall.Close(fd)
		return f, nop
	}
	nf := os.NewFile(uintptr(fd), f.Name()) // non-blocking, so on the poller
	rc, err := nf.SyscallConn()
	if err != nil {
		nf.Close()
		return f, nop
	}
	return rawFD{rc}, func() {
		// Closing wakes a read still waiting in the poller, which ends
		// with an error instead of on a descriptor turned blocking.
		nf.Close()
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
