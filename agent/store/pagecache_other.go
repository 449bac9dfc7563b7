//go:build !linux

package store

// forgetCached does nothing off Linux: pagecache_linux.go says why it exists.
func (db *DB) forgetCached() {}
