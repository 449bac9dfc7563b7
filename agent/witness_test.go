package agent

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/raspi-mcp/raspi-mcp/agent/store"
	"github.com/raspi-mcp/raspi-mcp/hw/sysinfo"
	"github.com/raspi-mcp/raspi-mcp/privhelper/client"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
	"github.com/raspi-mcp/raspi-mcp/privhelper/witness"
)

// denied makes one audited call: a reboot without confirm is refused.
func (r *rig) denied() {
	r.t.Helper()
	if res, sc := r.as(admin, "system_reboot", map[string]any{}); errCode(res, sc) == "" {
		r.t.Fatalf("reboot without confirm was not refused: %v", sc)
	}
}

func (r *rig) witnessFile() witness.File {
	r.t.Helper()
	f, err := witness.Read(witness.Path(r.cfg.Helper.StateDir))
	if err != nil {
		r.t.Fatal(err)
	}
	return f
}

// restartOn closes the agent's database, lets fn edit the file as the
// agent's user could while the agent is stopped, and starts a new agent on
// it with the same helper.
func (r *rig) restartOn(fn func(tx *bolt.Tx) error) {
	r.t.Helper()
	path := r.db.Path()
	if err := r.db.Close(); err != nil {
		r.t.Fatal(err)
	}
	b, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		r.t.Fatal(err)
	}
	if err := b.Update(fn); err != nil {
		r.t.Fatal(err)
	}
	b.Close()
	if r.db, err = store.Open(path, store.Options{}); err != nil {
		r.t.Fatal(err)
	}
	db := r.db
	r.t.Cleanup(func() { db.Close() })
	r.a, err = New(Options{Config: r.cfg, Store: r.db, Sys: sysinfo.NewSim(sysinfo.SimOptions{}), Helper: r.helper,
		Version: "test", Mode: "sim", Logger: slog.New(r.appLog.Handler(slog.NewTextHandler(io.Discard, nil), "agent")),
		Units: r.units, Journal: r.units.Journal(), Root: os.DirFS("/"), AppLog: r.appLog})
	if err != nil {
		r.t.Fatal(err)
	}
}

func key(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

// logged returns the agent's error log lines that contain s.
func (r *rig) logged(s string) []string {
	var out []string
	for _, e := range r.appLog.Entries(slog.LevelError, "agent", 100) {
		if strings.Contains(e.Message, s) {
			out = append(out, e.Message+" "+e.Attrs)
		}
	}
	return out
}

func TestEveryRecordWitnessedBeforeAnswer(t *testing.T) {
	r := newRig(t, nil)
	for i := 1; i <= 3; i++ {
		r.denied()
		last, err := r.db.GetAudit(uint64(i))
		if err != nil {
			t.Fatal(err)
		}
		head, ok := r.witnessFile().Head()
		if !ok || head.Seq != last.Seq || head.Hash != last.Hash {
			t.Fatalf("after call %d the witness holds %+v, want record %d %s", i, head, last.Seq, last.Hash)
		}
	}
	v, err := r.verifyAudit()
	if err != nil || !v.OK || v.Witness == nil || v.Witness.Seq != 3 || v.Witness.Unwitnessed != 0 || v.StoredCount != 3 {
		t.Fatalf("verify = %+v, %v", v, err)
	}
	st, err := r.a.newManageTools().status(context.Background(), admin)
	if err != nil || st.Audit.Tampered || st.Audit.WitnessSeq != 3 || st.Audit.Unwitnessed != 0 {
		t.Fatalf("status audit = %+v, %v", st.Audit, err)
	}
}

// With the helper down the call still answers at once and is audited; the
// record is witnessed when the helper is back.
func TestWitnessHelperDown(t *testing.T) {
	r := newRig(t, nil)
	r.denied()
	r.killHelper()
	r.denied()
	st, _ := r.a.newManageTools().status(context.Background(), admin)
	if st.Audit.Unwitnessed != 1 || st.Audit.WitnessError == "" || st.Audit.Tampered {
		t.Fatalf("status with the helper down = %+v", st.Audit)
	}
	if v, _ := r.verifyAudit(); !v.OK || v.Witness.Unwitnessed != 1 {
		t.Fatalf("an unwitnessed tail is not tampering: %+v", v)
	}
	r.startHelper()
	r.denied()
	if head, _ := r.witnessFile().Head(); head.Seq != 3 {
		t.Fatalf("witness after the helper came back: %+v", head)
	}
}

// Found: the agent started on a cut trail without a word. Now it logs what
// is missing, status shows it, the trail is not resealed, and new records
// are witnessed after the witnessed head so the cut stays in the chain.
func TestAgentStartsOnCutTrail(t *testing.T) {
	r := newRig(t, nil)
	for range 5 {
		r.denied()
	}
	rec3, _ := r.db.GetAudit(3)
	rec5, _ := r.db.GetAudit(5)
	// Records 4 and 5 deleted, head and count rewritten to match: the
	// chain alone verifies.
	r.restartOn(func(tx *bolt.Tx) error {
		a, m := tx.Bucket([]byte("audit")), tx.Bucket([]byte("meta"))
		a.Delete(key(4))
		a.Delete(key(5))
		head, _ := json.Marshal(map[string]any{"seq": 3, "hash": rec3.Hash})
		m.Put([]byte("audit_head"), head)
		return m.Put([]byte("audit_stats"), []byte(`{"total":3,"denied":3,"errors":3}`))
	})
	if v, _ := r.db.VerifyAudit(); !v.OK {
		t.Fatalf("the test's cut is not intact in itself: %+v", v.Problems)
	}
	want := "records 4-5 missing: witness saw seq 5 hash " + witness.Short(rec5.Hash) + ", the chain ends at 3"
	if lines := r.logged("AUDIT TRAIL TAMPERED"); len(lines) != 1 || !strings.Contains(lines[0], want) {
		t.Fatalf("start log = %q, want one error naming %q", lines, want)
	}
	st, _ := r.a.newManageTools().status(context.Background(), admin)
	if !st.Audit.Tampered || len(st.Audit.Findings) != 1 || !strings.Contains(st.Audit.Findings[0], want) {
		t.Fatalf("status audit = %+v", st.Audit)
	}
	v, _ := r.verifyAudit()
	if v.OK || len(v.Problems) != 1 || v.Problems[0].Kind != store.ProblemWitnessMissing || v.Problems[0].Detail != want {
		t.Fatalf("verify = %+v", v)
	}

	// The agent keeps serving; the next record follows the witnessed head.
	r.denied()
	rec6, err := r.db.GetAudit(6)
	if err != nil || rec6.PrevHash != rec5.Hash {
		t.Fatalf("record after the cut: %+v %v; want seq 6 linking to the witnessed record 5", rec6, err)
	}
	if _, err := r.db.GetAudit(4); err == nil {
		t.Fatal("a record 4 was written: the cut was sealed over")
	}
	if head, _ := r.witnessFile().Head(); head.Seq != 6 || head.Hash != rec6.Hash {
		t.Fatalf("the record after the cut was not witnessed: %+v", head)
	}
	v, _ = r.verifyAudit()
	kinds := map[string]bool{}
	for _, p := range v.Problems {
		kinds[p.Kind] = true
	}
	if v.OK || !kinds[store.ProblemGap] || !kinds[store.ProblemWitnessMissing] {
		t.Fatalf("after new records the cut must still show: %+v", v.Problems)
	}
}

// Every record and the head deleted: "intact, 0 records" before; now the
// agent and verify name the records the witness saw.
func TestAgentStartsOnWipedTrail(t *testing.T) {
	r := newRig(t, nil)
	for range 4 {
		r.denied()
	}
	r.restartOn(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket([]byte("audit")); err != nil {
			return err
		}
		if _, err := tx.CreateBucket([]byte("audit")); err != nil {
			return err
		}
		m := tx.Bucket([]byte("meta"))
		m.Delete([]byte("audit_stats"))
		return m.Delete([]byte("audit_head"))
	})
	if lines := r.logged("AUDIT TRAIL TAMPERED"); len(lines) != 1 || !strings.Contains(lines[0], "records 1-4 missing") {
		t.Fatalf("start log = %q", lines)
	}
	v, _ := r.verifyAudit()
	if v.OK || v.Records != 0 || len(v.Problems) != 1 || !strings.Contains(v.Problems[0].Detail, "no records are stored") {
		t.Fatalf("verify = %+v", v)
	}
}

// A head the helper refuses while the agent runs (here the witness was
// moved ahead, as a chain cut behind the agent's back looks) is logged and
// shown, and the records after it follow the witnessed head.
func TestWitnessRefusalWhileRunning(t *testing.T) {
	r := newRig(t, nil)
	r.denied()
	ahead := "sha256:" + strings.Repeat("ab", 32)
	if _, err := client.Call(context.Background(), r.helper, proto.AuditWitness, proto.AuditWitnessReq{Seq: 10, Hash: ahead}); err != nil {
		t.Fatal(err)
	}
	r.denied() // record 2: refused by the witness
	if lines := r.logged("witness refused head 2"); len(lines) != 1 {
		t.Fatalf("refusal log = %q", r.appLog.Entries(slog.LevelInfo, "", 20))
	}
	st, _ := r.a.newManageTools().status(context.Background(), admin)
	if !st.Audit.Tampered {
		t.Fatalf("status = %+v", st.Audit)
	}
	r.denied()
	rec, err := r.db.GetAudit(11)
	if err != nil || rec.PrevHash != ahead {
		t.Fatalf("record after the refusal: %+v %v; want 11 after the witnessed 10", rec, err)
	}
	if head, _ := r.witnessFile().Head(); head.Seq != 11 {
		t.Fatalf("witness = %+v", head)
	}
}

// Retention tells the witness first; the pruned trail verifies intact.
func TestPruneAuditWithWitness(t *testing.T) {
	r := newRig(t, nil)
	for range 6 {
		r.denied()
	}
	n, err := r.a.pruneAudit(context.Background(), time.Now().Add(time.Hour))
	if err != nil || n != 5 {
		t.Fatalf("prune: %d, %v", n, err)
	}
	if cp, ok := r.witnessFile().Checkpoint(); !ok || cp.Seq != 5 {
		t.Fatalf("witnessed checkpoint = %+v", cp)
	}
	r.denied()
	v, err := r.verifyAudit()
	if err != nil || !v.OK || v.CheckpointSeq != 5 || v.Records != 2 || v.Witness.CheckpointSeq != 5 || v.Witness.Seq != 7 {
		t.Fatalf("verify after pruning = %+v, %v", v, err)
	}
	// Without the helper nothing is pruned.
	r.killHelper()
	if n, err := r.a.pruneAudit(context.Background(), time.Now().Add(time.Hour)); err == nil || n != 0 {
		t.Fatalf("prune without the witness: %d, %v", n, err)
	}
}
