package store

import "github.com/raspi-mcp/raspi-mcp/internal/canon"

// CanonicalJSON is canon.JSON: the one byte form of v that hashes are
// computed over (the rules are written out there).
func CanonicalJSON(v any) ([]byte, error) { return canon.JSON(v) }

// HashJSON is canon.Hash: "sha256:" + hex(sha256(CanonicalJSON(v))), the
// form of in_hash, out_hash and plan hashes.
func HashJSON(v any) (string, error) { return canon.Hash(v) }

func sha256Prefixed(b []byte) string { return canon.SHA256(b) }
