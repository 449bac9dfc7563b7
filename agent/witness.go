package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/raspi-mcp/raspi-mcp/agent/store"
	"github.com/raspi-mcp/raspi-mcp/privhelper/client"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
	"github.com/raspi-mcp/raspi-mcp/privhelper/witness"
)

// witnessWait bounds how long an audited call waits for the helper to
// witness its record. The record itself is already durable; the witness is
// a second copy of the head, so a slow or absent helper delays the answer
// by at most this and never fails it. The next append, or the retry in
// Serve, witnesses the head later.
const witnessWait = 2 * time.Second

// witnessRetry is how often Serve retries a head the helper has not yet
// witnessed (the helper was down or restarting).
const witnessRetry = 30 * time.Second

// witnesser has the root helper witness the audit chain's head after every
// append, before the tool answers.
//
// Order matters for which way errors go: the head is sent only after bbolt
// has committed and synced the record, and the helper does not sync its
// line, so a crash or power loss can only leave the witness behind the
// chain, which verification accepts. It never leaves it ahead, which is
// what a cut chain looks like.
//
// Sends are coalesced: one goes to the helper at a time, always the newest
// head, so concurrent appends share a round trip, and a record already
// covered by a later witnessed head is not sent at all.
type witnesser struct {
	helper *client.Client
	path   string // the helper's witness file, read directly (it is 0644)
	log    *slog.Logger

	turn chan struct{} // one send at a time; a channel so waiting honours ctx

	mu       sync.Mutex
	latest   store.WitnessPoint // newest head appended
	acked    store.WitnessPoint // newest head the helper confirmed
	after    store.WitnessPoint // the witnessed head new records must follow
	lastErr  string             // why the last send failed ("" when it did not)
	findings []string           // tampering found at start or refused since; kept for status
}

func newWitnesser(helper *client.Client, path string, log *slog.Logger) *witnesser {
	return &witnesser{helper: helper, path: path, log: log, turn: make(chan struct{}, 1)}
}

// readWitness reads the helper's witness file for verification. A missing
// file is not an error (a new install, or a helper without a witness);
// anything else unreadable is reported.
func readWitness(path string) (*store.Witness, *AuditWitnessOut, error) {
	out := &AuditWitnessOut{Path: path}
	f, err := witness.Read(path)
	if errors.Is(err, fs.ErrNotExist) {
		out.Error = "no witness file: the helper has not witnessed this trail yet"
		return nil, out, nil
	}
	if err != nil {
		out.Error = err.Error()
		return nil, out, err
	}
	w := &store.Witness{}
	for _, p := range f.Points {
		w.Heads = append(w.Heads, store.WitnessPoint{Seq: p.Seq, Hash: p.Hash})
	}
	if cp, ok := f.Checkpoint(); ok {
		w.Checkpoint = store.WitnessPoint{Seq: cp.Seq, Hash: cp.Hash}
	}
	out.BadLines = f.Bad
	if len(w.Heads) == 0 {
		out.Error = "the witness file holds no head yet"
		return nil, out, nil
	}
	return w, out, nil
}

// start compares the chain with the witness file once, logs what does not
// hold, and remembers it for status. It never changes the chain: a cut or
// rewritten trail is evidence, and resealing it would destroy that. New
// records follow the witnessed head from here on (store.AppendAuditAfter).
func (w *witnesser) start(db *store.DB) {
	wf, info, err := readWitness(w.path)
	if err != nil {
		w.log.Warn("audit witness unreadable; the chain is checked on its own", "path", w.path, "err", err)
	} else if wf == nil {
		w.log.Info("audit witness: "+info.Error, "path", w.path)
	}
	// The anchor first, whatever verification finds: new records must
	// never reuse a sequence number the witness already saw.
	var head store.WitnessPoint
	if wf != nil {
		head = wf.Heads[len(wf.Heads)-1]
	}
	_, _, _, last, _ := db.AuditCounts()
	w.mu.Lock()
	w.after = head
	if last.Seq >= head.Seq {
		w.acked = head // never resend what the witness holds
	}
	if last.Seq > head.Seq {
		// Records the witness lost (power loss) or never saw (helper
		// down): Serve's retry sends the tip.
		w.latest = store.WitnessPoint{Seq: last.Seq, Hash: last.Hash}
	}
	w.mu.Unlock()

	v, err := db.VerifyAuditWitness(wf)
	if err != nil {
		w.log.Error("audit trail could not be verified at start", "err", err)
		return
	}
	if v.OK {
		w.log.Info("audit trail verified at start", "records", v.Records, "first_seq", v.FirstSeq, "last_seq", v.LastSeq,
			"witness_seq", v.WitnessSeq, "unwitnessed", v.Unwitnessed)
		return
	}
	var shown []string
	for _, p := range v.Problems {
		f := fmt.Sprintf("%s: %s", p.Kind, p.Detail)
		w.note(f)
		if len(shown) < 5 {
			shown = append(shown, f)
		}
	}
	w.log.Error("AUDIT TRAIL TAMPERED: the chain does not verify; it is kept as found, for `raspi-mcp audit verify`, and new records are appended after it",
		"problems", v.ProblemCount, "found", strings.Join(shown, "; "),
		"records", v.Records, "last_seq", v.LastSeq, "witness_seq", v.WitnessSeq)
}

func (w *witnesser) note(finding string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.findings) < 20 {
		w.findings = append(w.findings, finding)
	}
}

// anchor is the witnessed head the next record must follow.
func (w *witnesser) anchor() store.WitnessPoint {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.after
}

// appended notes a new head and has the helper witness it, waiting at most
// witnessWait. Failures are logged, never returned: the record is durable.
func (w *witnesser) appended(ctx context.Context, r store.AuditRecord) {
	w.mu.Lock()
	if r.Seq > w.latest.Seq {
		w.latest = store.WitnessPoint{Seq: r.Seq, Hash: r.Hash}
	}
	w.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, witnessWait)
	defer cancel()
	w.flush(ctx, r.Seq)
}

// flush sends the newest head unless the helper already witnessed seq.
func (w *witnesser) flush(ctx context.Context, seq uint64) {
	if w.helper == nil {
		return // an agent built without a helper (some tests): nothing to witness with
	}
	select {
	case w.turn <- struct{}{}:
		defer func() { <-w.turn }()
	case <-ctx.Done():
		return
	}
	w.mu.Lock()
	head, done := w.latest, w.acked.Seq >= seq || w.latest.Seq == 0
	w.mu.Unlock()
	if done {
		return
	}
	resp, err := client.Call(ctx, w.helper, proto.AuditWitness, proto.AuditWitnessReq{Seq: head.Seq, Hash: head.Hash})
	w.mu.Lock()
	defer w.mu.Unlock()
	if err == nil {
		if w.lastErr != "" {
			w.log.Info("audit witness reachable again", "seq", resp.Seq)
		}
		w.lastErr = ""
		if head.Seq > w.acked.Seq {
			w.acked = head
		}
		if head.Seq > w.after.Seq {
			w.after = head
		}
		return
	}
	var pe *proto.Error
	if errors.As(err, &pe) && pe.Code == proto.CodeFailedPrecondition {
		// The witness holds a head this chain does not: it was cut or
		// rewritten behind the agent's back. Keep the finding, and let the
		// next record follow the witnessed head so it can be witnessed.
		ws, _ := pe.Details["witnessed_seq"].(float64)
		wh, _ := pe.Details["witnessed_hash"].(string)
		finding := fmt.Sprintf("witness refused head %d: it already saw seq %d hash %s; the chain was cut or rewritten", head.Seq, uint64(ws), witness.Short(wh))
		if len(w.findings) < 20 {
			w.findings = append(w.findings, finding)
		}
		w.log.Error("AUDIT TRAIL TAMPERED: "+finding, "seq", head.Seq, "witnessed_seq", uint64(ws))
		if uint64(ws) > w.after.Seq && witness.ValidHash(wh) {
			w.after = store.WitnessPoint{Seq: uint64(ws), Hash: wh}
		}
		w.acked = head // the helper will never take it; do not resend it
		return
	}
	if w.lastErr == "" {
		w.log.Warn("audit witness unavailable; records are witnessed once the helper answers", "seq", head.Seq, "err", err)
	}
	w.lastErr = err.Error()
}

// retry witnesses a head left pending while the helper was away.
func (w *witnesser) retry(ctx context.Context) {
	t := time.NewTicker(witnessRetry)
	defer t.Stop()
	for {
		w.mu.Lock()
		seq := w.latest.Seq
		w.mu.Unlock()
		cctx, cancel := context.WithTimeout(ctx, witnessWait)
		w.flush(cctx, seq)
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// checkpoint has the helper witness (and sync) a checkpoint before
// retention prunes through it. The newest head goes first: the helper takes
// a checkpoint only at or behind a head it witnessed.
func (w *witnesser) checkpoint(ctx context.Context, cp store.WitnessPoint) error {
	if w.helper == nil {
		return errors.New("agent: no helper to witness the audit checkpoint")
	}
	w.mu.Lock()
	seq := w.latest.Seq
	w.mu.Unlock()
	w.flush(ctx, seq)
	if _, err := client.Call(ctx, w.helper, proto.AuditWitness, proto.AuditWitnessReq{Seq: cp.Seq, Hash: cp.Hash, Checkpoint: true}); err != nil {
		return fmt.Errorf("agent: witness audit checkpoint %d: %w", cp.Seq, err)
	}
	return nil
}

// status is the witness as status shows it.
func (w *witnesser) status() (acked store.WitnessPoint, lastErr string, findings []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.acked, w.lastErr, append([]string(nil), w.findings...)
}

// appendAudit writes one audit record, durably, then has it witnessed.
// Every audit record the agent writes goes through here.
func (a *Agent) appendAudit(rec store.AuditRecord) (store.AuditRecord, error) {
	stored, err := a.store.AppendAuditAfter(rec, a.witness.anchor())
	if err != nil {
		return stored, err
	}
	a.witness.appended(context.Background(), stored)
	return stored, nil
}

// pruneAudit is audit retention: it deletes records older than before,
// after the helper has witnessed the checkpoint, so verification can tell
// the prune from a deletion. Without a witness nothing is pruned.
func (a *Agent) pruneAudit(ctx context.Context, before time.Time) (int, error) {
	return a.store.PruneAuditWitnessed(before, func(cp store.WitnessPoint) error {
		return a.witness.checkpoint(ctx, cp)
	})
}
