package store

import (
	"os"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// resident counts the pages of path the page cache holds, by mapping the
// file and asking mincore, which faults nothing in.
func resident(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, (len(m)+os.Getpagesize()-1)/os.Getpagesize())
	if _, _, e := syscall.Syscall(syscall.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatal(os.NewSyscallError("mincore", e))
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}

// A flush leaves none of the file's pages cached, not even those bbolt's
// map has faulted in, so the next commit's page writes make folios of
// their own size: see forgetCached. Reads keep working from the file.
func TestFlushForgetsCachedPages(t *testing.T) {
	path := testPath(t)
	db := openAt(t, path)
	defer db.Close()
	appendBatches(t, db, "job-a", 0, 200, 12)
	if _, err := db.SampleStats("job-a"); err != nil { // reads through the map
		t.Fatal(err)
	}
	if n := resident(t, path); n == 0 {
		t.Fatal("no page of the file is cached after 200 commits: the check below would prove nothing")
	}
	db.forgetCached()
	if n := resident(t, path); n != 0 {
		t.Fatalf("%d pages of the file still cached after forgetCached", n)
	}
	// An ordinary flush forgets too, and what was stored reads back.
	appendBatches(t, db, "job-a", 200*12, 1, 12)
	if n := resident(t, path); n != 0 {
		t.Fatalf("%d pages of the file still cached after a flush", n)
	}
	got := 0
	if err := db.ScanSamples("job-a", time.Time{}, at(201*12), func(Sample) bool { got++; return true }); err != nil {
		t.Fatal(err)
	}
	if got != 201*12 {
		t.Fatalf("read back %d samples, want %d", got, 201*12)
	}
}
