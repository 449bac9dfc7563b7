package e2e

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

type job struct {
	ID      string `json:"job_id"`
	Status  string `json:"status"`
	Samples int    `json:"samples"`
	Unflush int    `json:"unflushed_samples"`
	Last    string `json:"last_sample"`
}

func jobsOf(t *testing.T, s *sim) []job {
	t.Helper()
	cs := s.session(t)
	defer cs.Close()
	_, m := call(t, cs, "metrics_list_sampling_jobs", nil)
	var out []job
	for _, x := range m["jobs"].([]any) {
		j := x.(map[string]any)
		out = append(out, job{ID: j["job_id"].(string), Status: j["status"].(string), Samples: int(j["samples"].(float64)), Unflush: int(j["unflushed_samples"].(float64))})
	}
	return out
}

// A sampling job started over MCP survives kill -9 of the agent: what was
// flushed before the crash is there, sampling resumes after the restart, and
// the audit chain still verifies.
func TestSamplingSurvivesKill9(t *testing.T) {
	dir, err := os.MkdirTemp("", "raspi-mcp-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	cfg := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(cfg, []byte("[metrics]\ndefault_job = false\nflush_interval = \"1s\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startSimIn(t, dir, "--config", cfg)
	cs := s.session(t)
	res, m := call(t, cs, "metrics_start_sampling_job", map[string]any{"interval_seconds": 5, "retention_hours": 1, "reason": "e2e"})
	if res.IsError {
		t.Fatalf("%v", m)
	}
	id := m["job_id"].(string)
	cs.Close()
	// Wait for two flushed samples (t=0 and t=5 s, flushed within 1 s).
	var flushed int
	deadline := time.Now().Add(hangGuard)
	for {
		js := jobsOf(t, s)
		if len(js) == 1 && js[0].Samples-js[0].Unflush >= 2 {
			flushed = js[0].Samples - js[0].Unflush
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no flushed samples: %+v", js)
		}
		time.Sleep(200 * time.Millisecond)
	}
	_, helperPID := statusPIDs(t, dir)
	killedAt := time.Now() // every sample taken before the crash is older
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = s.cmd.Wait()
	// The helper child follows its parent (Pdeathsig); wait for it to go.
	for syscall.Kill(helperPID, 0) == nil {
		if time.Since(killedAt) > hangGuard {
			t.Fatalf("helper %d still alive %v after its agent was killed", helperPID, hangGuard)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Samples carry whole seconds: restarting in a later second than the
	// kill lets a sample's second tell on which side of the crash it was
	// taken, however long the kill and the restart took.
	boundary := killedAt.Truncate(time.Second).Add(time.Second)
	time.Sleep(time.Until(boundary))
	s2 := startSimIn(t, dir, "--config", cfg)
	js := jobsOf(t, s2)
	if len(js) != 1 || js[0].ID != id || js[0].Status != "running" {
		t.Fatalf("job after restart: %+v", js)
	}
	if js[0].Samples < flushed {
		t.Fatalf("lost flushed samples: %d before the crash, %d after", flushed, js[0].Samples)
	}
	before := js[0].Samples
	deadline = time.Now().Add(hangGuard)
	for js[0].Samples <= before {
		if time.Now().After(deadline) {
			t.Fatalf("sampling did not resume: %+v", js)
		}
		time.Sleep(500 * time.Millisecond)
		js = jobsOf(t, s2)
	}
	// Samples from before the crash and after the restart are both queryable.
	cs2 := s2.session(t)
	_, page := call(t, cs2, "metrics_get_samples", map[string]any{"job_id": id, "limit": 1000})
	var pre, post int
	for _, x := range page["samples"].([]any) {
		ts, _ := time.Parse(time.RFC3339, x.(map[string]any)["timestamp"].(string))
		if ts.Before(boundary) {
			pre++
		} else {
			post++
		}
	}
	if pre < flushed || post < 1 {
		t.Fatalf("samples before crash %d (flushed %d), after restart %d", pre, flushed, post)
	}
	if out, rc := s2.cli(t, "audit", "verify"); rc != 0 {
		t.Fatalf("audit verify after kill -9: %s", out)
	}
}
