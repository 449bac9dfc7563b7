package rawio

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// A pipe is taken over in non-blocking mode and given back as it was; a
// regular file or a character device (a terminal's kind) is used as it is.
func TestStdio(t *testing.T) {
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil { // blocking, as a shell's
		t.Fatal(err)
	}
	r, w := os.NewFile(uintptr(p[0]), "r"), os.NewFile(uintptr(p[1]), "w")
	defer r.Close()
	defer w.Close()
	rw, closeRW, restore := Stdio(r)
	if _, ok := rw.(*FD); !ok {
		t.Fatalf("a pipe: got %T, want an FD", rw)
	}
	if !isNonblocking(t, p[0]) {
		t.Error("the pipe is not non-blocking while in use")
	}
	if _, err := w.Write([]byte("x\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8)
	if n, err := rw.Read(buf); err != nil || string(buf[:n]) != "x\n" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	closeRW()
	restore()
	if isNonblocking(t, p[0]) {
		t.Error("the pipe was left non-blocking")
	}
	// Still open for its owner.
	if _, err := w.Write([]byte("y")); err != nil {
		t.Fatal(err)
	}
	if n, err := r.Read(buf); err != nil || string(buf[:n]) != "y" {
		t.Fatalf("read after undo %q, %v", buf[:n], err)
	}

	file, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	for _, f := range []*os.File{file, null} {
		rw, closeRW, restore := Stdio(f)
		closeRW()
		restore()
		if rw != f {
			t.Errorf("%s: got %T, want the file itself", f.Name(), rw)
		}
	}
}

func isNonblocking(t *testing.T, fd int) bool {
	t.Helper()
	fl, err := fcntl(fd, syscall.F_GETFL, 0)
	if err != nil {
		t.Fatal(err)
	}
	return fl&syscall.O_NONBLOCK != 0
}
