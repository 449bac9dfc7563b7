package privhelper

import (
	"context"
	"errors"

	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
	"github.com/raspi-mcp/raspi-mcp/privhelper/witness"
)

func (s *Server) registerWitness() {
	if s.witness != nil {
		handle(s.mux, proto.AuditWitness, s.auditWitness)
	}
}

// auditWitness appends the agent's chain head to the witness file. A head
// that would rewind the witness is refused and logged at Warn: it means the
// agent's chain was cut, rewritten or wiped, and the helper's own log is a
// second record of that which the agent's user cannot edit.
func (s *Server) auditWitness(ctx context.Context, r proto.AuditWitnessReq) (proto.AuditWitnessResp, error) {
	p := peerFrom(ctx)
	witnessFn, what := s.witness.Witness, "head"
	if r.Checkpoint {
		witnessFn, what = s.witness.Checkpoint, "checkpoint"
	}
	head, written, err := witnessFn(r.Seq, r.Hash)
	if errors.Is(err, witness.ErrRewind) {
		s.log.Warn("privhelper: audit witness refused a "+what+" that goes backwards: the agent's audit chain was cut or rewritten",
			"seq", r.Seq, "hash", r.Hash, "witnessed_seq", head.Seq, "witnessed_hash", head.Hash, "uid", p.UID, "pid", p.PID)
		return proto.AuditWitnessResp{}, proto.Errorf(proto.CodeFailedPrecondition, "privhelper: %v", err).
			With("witnessed_seq", head.Seq).With("witnessed_hash", head.Hash)
	}
	if err != nil {
		return proto.AuditWitnessResp{}, err
	}
	if r.Checkpoint && written {
		s.log.Info("privhelper: audit checkpoint witnessed: retention may prune through it", "seq", r.Seq, "uid", p.UID, "pid", p.PID)
	}
	return proto.AuditWitnessResp{Seq: head.Seq, Hash: head.Hash, Written: written}, nil
}
