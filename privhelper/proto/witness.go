package proto

import (
	"fmt"
	"strings"
)

// AuditWitness is how the agent has the helper witness its audit chain's
// head after each append. The helper keeps the heads in a file the agent's
// user cannot write, and refuses a head that goes backwards or changes the
// hash of one already witnessed (failed_precondition, with the witnessed
// head in details "witnessed_seq" and "witnessed_hash").
var AuditWitness = Method[AuditWitnessReq, AuditWitnessResp]{"audit.witness", Quick}

// AuditWitnessReq is the chain's head after an append or, with Checkpoint,
// the last record retention is about to prune. The agent sends a checkpoint
// before it prunes: the helper syncs it, so the witness never misses a
// legitimate prune, and it must be at or behind the witnessed head.
type AuditWitnessReq struct {
	Seq        uint64 `json:"seq"`
	Hash       string `json:"hash"` // "sha256:<64 hex>", the record's hash
	Checkpoint bool   `json:"checkpoint"`
}

// AuditWitnessResp is the witnessed head (or checkpoint) after the call.
type AuditWitnessResp struct {
	Seq     uint64 `json:"seq"`
	Hash    string `json:"hash"`
	Written bool   `json:"written"` // false when this head was already witnessed
}

// Validate checks the sequence number and the hash's form.
func (r AuditWitnessReq) Validate() error {
	if r.Seq == 0 {
		return invalid("seq", r.Seq, "proto: audit witness seq must be at least 1")
	}
	hex, ok := strings.CutPrefix(r.Hash, "sha256:")
	valid := ok && len(hex) == 64
	for _, c := range hex {
		valid = valid && (c >= '0' && c <= '9' || c >= 'a' && c <= 'f')
	}
	if !valid {
		return invalid("hash", clip(r.Hash), fmt.Sprintf("proto: audit witness hash %q is not sha256:<64 lower-case hex digits>", clip(r.Hash)))
	}
	return nil
}
