package store

import (
	"fmt"
	"strings"
)

// Problem kinds found by comparing the chain with the helper's witness.
const (
	ProblemWitnessMissing  = "witness_missing"  // records the witness saw are gone (and not pruned with a witnessed checkpoint)
	ProblemWitnessMismatch = "witness_mismatch" // a record's hash differs from what the witness saw: rewritten
)

// WitnessPoint is a record the helper witnessed: its seq and hash.
type WitnessPoint struct {
	Seq  uint64
	Hash string
}

// Witness is what the root helper's witness file says about the chain: every
// head it saw after an append, oldest first, and the last checkpoint
// retention announced before it pruned (zero when none). The store does not
// read the file itself; the agent and the CLI do and pass it in.
type Witness struct {
	Heads      []WitnessPoint
	Checkpoint WitnessPoint
}

// head is the last witnessed head (zero when none).
func (w *Witness) head() WitnessPoint {
	if w == nil || len(w.Heads) == 0 {
		return WitnessPoint{}
	}
	return w.Heads[len(w.Heads)-1]
}

func shortHash(h string) string {
	h = strings.TrimPrefix(h, "sha256:")
	if len(h) > 12 {
		return h[:12] + "…"
	}
	return h
}

// witnessCheck compares the chain with the witness while verifyTx walks the
// records in order: both are sorted by seq, so one merge pass does it with
// no record kept in memory.
type witnessCheck struct {
	res       *AuditVerify
	pts       []WitnessPoint
	i         int
	pruned    uint64       // witnessed points at or below this may be absent: pruned by witnessed retention
	chainCP   WitnessPoint // the chain's own checkpoint (zero: none)
	prevChain uint64       // the last stored record walked (0 none yet)

	// A run of consecutive witnessed points whose hash differs.
	mmFirst WitnessPoint
	mmHash  string // the chain's hash at mmFirst
	mmLast  uint64
	mmN     int
}

func newWitnessCheck(res *AuditVerify, w *Witness, chainCP WitnessPoint) *witnessCheck {
	if w == nil || len(w.Heads) == 0 {
		return nil
	}
	c := &witnessCheck{res: res, pts: w.Heads, pruned: min(chainCP.Seq, w.Checkpoint.Seq), chainCP: chainCP}
	// Retention checkpoints the same record on both sides; a checkpoint
	// with another hash was forged.
	if wc := w.Checkpoint; wc.Seq != 0 && wc.Seq == chainCP.Seq && wc.Hash != chainCP.Hash {
		res.add(wc.Seq, ProblemWitnessMismatch, "checkpoint %d differs from what the witness saw (rewritten): witness saw hash %s, the chain's checkpoint has %s",
			wc.Seq, shortHash(wc.Hash), shortHash(chainCP.Hash))
	}
	return c
}

// record is called for each stored record in order; known is false when its
// hash could not be read (already reported as decode).
func (c *witnessCheck) record(seq uint64, hash string, known bool) {
	if c == nil {
		return
	}
	where := fmt.Sprintf("the chain goes from %d to %d", c.prevChain, seq)
	if c.prevChain == 0 {
		where = fmt.Sprintf("the chain starts at %d", seq)
	}
	c.missingBefore(seq, where)
	if c.i < len(c.pts) && c.pts[c.i].Seq == seq {
		p := c.pts[c.i]
		c.i++
		if known && p.Hash != hash {
			if c.mmN == 0 {
				c.mmFirst, c.mmHash = p, hash
			}
			c.mmLast = seq
			c.mmN++
		} else {
			c.flushMismatch()
		}
	}
	c.prevChain = seq
}

// missingBefore reports the witnessed points below limit (all, when limit is
// 0) that the walk passed without finding their records.
func (c *witnessCheck) missingBefore(limit uint64, where string) {
	var last WitnessPoint
	n := 0
	for c.i < len(c.pts) && (limit == 0 || c.pts[c.i].Seq < limit) {
		p := c.pts[c.i]
		c.i++
		if p.Seq <= c.pruned {
			// Retention pruned it, and the witness was told first. The
			// checkpoint keeps the hash of the last record pruned.
			if p.Seq == c.chainCP.Seq && p.Hash != c.chainCP.Hash {
				c.res.add(p.Seq, ProblemWitnessMismatch, "record %d differs from what the witness saw (rewritten): witness saw hash %s, the chain's checkpoint has %s",
					p.Seq, shortHash(p.Hash), shortHash(c.chainCP.Hash))
			}
			continue
		}
		last = p
		n++
	}
	if n == 0 {
		return
	}
	c.flushMismatch()
	from := max(c.prevChain, c.pruned) + 1
	to := last.Seq
	if limit != 0 {
		to = limit - 1
	}
	rng := fmt.Sprintf("records %d-%d missing", from, to)
	if from == to {
		rng = fmt.Sprintf("record %d missing", from)
	}
	detail := fmt.Sprintf("%s: witness saw seq %d hash %s, %s", rng, last.Seq, shortHash(last.Hash), where)
	if c.chainCP.Seq > c.pruned && last.Seq <= c.chainCP.Seq {
		detail += fmt.Sprintf("; the chain's checkpoint claims records through %d were pruned, the witness saw pruning only through %d", c.chainCP.Seq, c.pruned)
	}
	c.res.add(from, ProblemWitnessMissing, "%s", detail)
}

func (c *witnessCheck) flushMismatch() {
	if c.mmN == 0 {
		return
	}
	rng := fmt.Sprintf("record %d differs", c.mmFirst.Seq)
	if c.mmN > 1 {
		rng = fmt.Sprintf("%d witnessed records from %d to %d differ", c.mmN, c.mmFirst.Seq, c.mmLast)
	}
	c.res.add(c.mmFirst.Seq, ProblemWitnessMismatch, "%s from what the witness saw (rewritten): witness saw seq %d hash %s, the chain has %s",
		rng, c.mmFirst.Seq, shortHash(c.mmFirst.Hash), shortHash(c.mmHash))
	c.mmN = 0
}

// finish reports witnessed points beyond the last stored record.
func (c *witnessCheck) finish() {
	if c == nil {
		return
	}
	where := fmt.Sprintf("the chain ends at %d", c.prevChain)
	if c.res.Records == 0 {
		where = "no records are stored"
	}
	c.missingBefore(0, where)
	c.flushMismatch()
}
