package e2e

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// auditedTrail starts laptop mode, makes n audited (denied) calls, stops
// the agent and returns it with each record's hash by seq.
func auditedTrail(t *testing.T, n int) (*sim, map[uint64]string) {
	t.Helper()
	s := startSim(t)
	cs := s.session(t)
	for range n {
		if _, m := call(t, cs, "system_reboot", map[string]any{}); code(m) == "" {
			t.Fatalf("reboot without confirm was not refused: %v", m)
		}
	}
	cs.Close()
	s.stop(t)
	hashes := map[uint64]string{}
	editState(t, s.dir, func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("audit")).ForEach(func(k, v []byte) error {
			var r struct {
				Seq  uint64 `json:"seq"`
				Hash string `json:"hash"`
			}
			if err := json.Unmarshal(v, &r); err != nil {
				return err
			}
			hashes[r.Seq] = r.Hash
			return nil
		})
	})
	if len(hashes) < n {
		t.Fatalf("%d audit records, want at least %d", len(hashes), n)
	}
	if out, rc := s.cli(t, "audit", "verify"); rc != 0 || !strings.Contains(out, fmt.Sprintf("witnessed by the helper through seq %d", len(hashes))) {
		t.Fatalf("verify before tampering: %d %s", rc, out)
	}
	return s, hashes
}

// editState edits state.db as the agent's user can while the agent is stopped.
func editState(t *testing.T, dir string, fn func(tx *bolt.Tx) error) {
	t.Helper()
	db, err := bolt.Open(filepath.Join(dir, "state.db"), 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(fn); err != nil {
		t.Fatal(err)
	}
}

func seqKey(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

func short(h string) string { return strings.TrimPrefix(h, "sha256:")[:12] + "…" }

// setMeta rewrites the chain's head and running count as a careful attacker
// would, so the chain is intact in itself.
func setMeta(tx *bolt.Tx, headSeq uint64, headHash string, total int) error {
	m := tx.Bucket([]byte("meta"))
	if headSeq == 0 {
		m.Delete([]byte("audit_head"))
	} else {
		head, _ := json.Marshal(map[string]any{"seq": headSeq, "hash": headHash})
		m.Put([]byte("audit_head"), head)
	}
	return m.Put([]byte("audit_stats"), fmt.Appendf(nil, `{"total":%d,"denied":%d,"errors":%d}`, total, total, total))
}

func verifyBroken(t *testing.T, s *sim, want ...string) string {
	t.Helper()
	out, rc := s.cli(t, "audit", "verify")
	if rc != 1 || !strings.Contains(out, "AUDIT CHAIN BROKEN") {
		t.Fatalf("audit verify after tampering: exit %d\n%s", rc, out)
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Fatalf("audit verify does not say %q:\n%s", w, out)
		}
	}
	return out
}

// Found: every record and the head deleted read "audit chain intact: 0 records".
func TestAuditVerifyCatchesAWipedTrail(t *testing.T) {
	s, h := auditedTrail(t, 3)
	n := uint64(len(h))
	editState(t, s.dir, func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket([]byte("audit")); err != nil {
			return err
		}
		if _, err := tx.CreateBucket([]byte("audit")); err != nil {
			return err
		}
		return setMeta(tx, 0, "", 0)
	})
	verifyBroken(t, s, fmt.Sprintf("witness_missing: records 1-%d missing: witness saw seq %d hash %s, no records are stored", n, n, short(h[n])))
}

// Found: the tail cut with the head rewritten to match passed verify.
func TestAuditVerifyCatchesACutTail(t *testing.T) {
	s, h := auditedTrail(t, 4)
	n := uint64(len(h))
	editState(t, s.dir, func(tx *bolt.Tx) error {
		for seq := n - 1; seq <= n; seq++ {
			tx.Bucket([]byte("audit")).Delete(seqKey(seq))
		}
		return setMeta(tx, n-2, h[n-2], int(n-2))
	})
	want := fmt.Sprintf("records %d-%d missing: witness saw seq %d hash %s, the chain ends at %d", n-1, n, n, short(h[n]), n-2)
	verifyBroken(t, s, want)

	// The agent starts on it, says so, keeps serving, shows it in status,
	// and does not seal over the cut.
	s2 := startSimIn(t, s.dir)
	out, _ := s2.cli(t, "status", "--json")
	var st struct {
		Status struct {
			Audit struct {
				Tampered bool     `json:"tampered"`
				Findings []string `json:"findings"`
			} `json:"audit"`
		} `json:"status"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil || !st.Status.Audit.Tampered || len(st.Status.Audit.Findings) == 0 ||
		!strings.Contains(st.Status.Audit.Findings[0], want) {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	if text, _ := s2.cli(t, "status"); !strings.Contains(text, "AUDIT TAMPERED") || !strings.Contains(text, want) {
		t.Fatalf("status:\n%s", text)
	}
	if !strings.Contains(s2.log.String(), "AUDIT TRAIL TAMPERED") {
		t.Fatalf("agent log at start does not report the cut:\n%s", s2.log)
	}
	cs := s2.session(t)
	call(t, cs, "system_reboot", map[string]any{})
	cs.Close()
	// Verify through the running agent: the cut is still reported.
	verifyBroken(t, s2, fmt.Sprintf("records %d-%d missing: witness saw seq %d hash %s, the chain goes from %d to %d", n-1, n, n, short(h[n]), n-2, n+1),
		fmt.Sprintf("gap: records %d..%d missing", n-1, n))
	s2.stop(t)
}

func TestAuditVerifyCatchesADeletedMiddleRecord(t *testing.T) {
	s, h := auditedTrail(t, 3)
	n := uint64(len(h))
	mid := n - 1
	editState(t, s.dir, func(tx *bolt.Tx) error {
		tx.Bucket([]byte("audit")).Delete(seqKey(mid))
		return setMeta(tx, n, h[n], int(n-1))
	})
	verifyBroken(t, s, fmt.Sprintf("gap: record %d missing", mid),
		fmt.Sprintf("witness_missing: record %d missing: witness saw seq %d hash %s, the chain goes from %d to %d", mid, mid, short(h[mid]), mid-1, n))
}
