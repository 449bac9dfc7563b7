package store

import (
	"syscall"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"
)

// forgetCached drops the file's clean pages from the page cache, and first
// from bbolt's map of it, which would otherwise keep them there.
//
// Why: on kernels whose page cache keeps large folios for ext4 (6.16 on),
// a folio is dirtied, and counted as written, whole. A folio made by one
// multi-page write (a samples block, bbolt's first four pages) or by
// read-ahead stays in the cache after the write, and every later commit
// that rewrites one 4 KiB page in it (the meta page, a leaf reusing a freed
// block's pages) then dirties and counts 16 to 256 KiB. Forgotten pages
// come back one page at a time: bbolt reads through a map it advises
// MADV_RANDOM, which faults in single pages, and a write makes a folio no
// larger than itself. Only clean pages go, so this is safe at any time;
// after an fsync'd commit there are no dirty ones. On older kernels every
// folio is one page and this only costs the next reads a fault each.
func (db *DB) forgetCached() {
	if db.file == nil || db.readOnly {
		return
	}
	// Inside a read transaction bbolt cannot remap the file, so the range
	// is its map and nothing else's for the whole call.
	_ = db.bolt.View(func(tx *bolt.Tx) error {
		// The map is read-only and shared: dropping its pages loses
		// nothing, and the next read faults them back in.
		_, _, _ = syscall.Syscall(syscall.SYS_MADVISE, tx.DB().Info().Data, uintptr(tx.Size()), syscall.MADV_DONTNEED)
		_ = unix.Fadvise(int(db.file.Fd()), 0, 0, unix.FADV_DONTNEED)
		return nil
	})
}
