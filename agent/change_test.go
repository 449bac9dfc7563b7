package agent

import (
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/agent/tool"
)

// A change token is its holder's: another principal presenting it is
// refused without using it up, and the holder's own commit still runs once.

var root = Principal{Name: "root", UID: 0, Role: RoleAdmin}

func TestAnotherPrincipalCannotBurnAChangeToken(t *testing.T) {
	r := newRig(t, nil)
	p := prepare(t, r, root, "system_shutdown", map[string]any{"reason": "move", "delay_seconds": 60})

	before := r.auditCount()
	res := r.call(t, admin, "change_commit", map[string]any{"token": p.Token})
	_, e := decodeResult[changeCommitOut](t, res)
	wantErr(t, e, CodePermissionDenied, nil)
	if strings.Contains(resultText(t, res), "root") {
		t.Errorf("the refusal names the token's holder: %s", resultText(t, res))
	}
	if n := r.auditCount() - before; n != 1 {
		t.Errorf("the refused commit wrote %d audit records, want 1", n)
	}
	recs, _, err := r.db.QueryAudit(storeQuery(1))
	if err != nil {
		t.Fatal(err)
	}
	if rec := recs[0]; rec.Tool != "change.commit" || rec.Principal != admin.Name || rec.Decision != "deny" || rec.ErrorCode != CodePermissionDenied {
		t.Errorf("audit record %+v", rec)
	}
	if len(r.pw.Events()) != 0 {
		t.Fatal("the refused commit acted")
	}

	c, e := callAs[changeCommitOut](t, r, root, "change_commit", map[string]any{"token": p.Token})
	if e != nil {
		t.Fatalf("the holder's commit after another's attempt: %+v", e)
	}
	if c.ToolID != "system.shutdown" {
		t.Fatalf("commit: %+v", c)
	}
	_, e = callAs[changeCommitOut](t, r, root, "change_commit", map[string]any{"token": p.Token})
	wantErr(t, e, CodeNotFound, map[string]any{"parameter": "token"}) // still single-use
	// And once used, another principal learns nothing new from it.
	_, e = callAs[changeCommitOut](t, r, admin, "change_commit", map[string]any{"token": p.Token})
	wantErr(t, e, CodeNotFound, map[string]any{"parameter": "token"})
}

// A refusal that is not the holder's doing (the owner switched the tool off
// between prepare and commit) leaves the token to its holder until it
// expires.
func TestPolicyRefusalAtCommitKeepsTheToken(t *testing.T) {
	r := newRig(t, nil)
	p := prepare(t, r, root, "system_shutdown", map[string]any{"reason": "again"})
	r.cfg.System.Shutdown = false
	before := r.auditCount()
	_, e := callAs[changeCommitOut](t, r, root, "change_commit", map[string]any{"token": p.Token})
	wantErr(t, e, CodePermissionDenied, nil)
	if n := r.auditCount() - before; n != 1 {
		t.Errorf("the refused commit wrote %d audit records, want 1", n)
	}
	r.cfg.System.Shutdown = true
	if _, e := callAs[changeCommitOut](t, r, root, "change_commit", map[string]any{"token": p.Token}); e != nil {
		t.Fatalf("commit once the switch is back on: %+v", e)
	}
}

func TestHolderDoubleCommitRunsOnce(t *testing.T) {
	r := newRig(t, nil)
	// Two sessions of the same principal, as two clients of one user.
	other := root
	other.PID = 4242
	p := prepare(t, r, root, "system_shutdown", map[string]any{"reason": "race", "delay_seconds": 60})
	var (
		wg   sync.WaitGroup
		errs [2]*tool.Error
	)
	for i, who := range []Principal{root, other} {
		s := r.session(t, who) // opened here: the race is between the calls
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := s.CallTool(t.Context(), &mcp.CallToolParams{Name: "change_commit", Arguments: map[string]any{"token": p.Token}})
			if err != nil {
				t.Error(err)
				return
			}
			if res.IsError {
				errs[i] = resultError(t, res)
			}
		}()
	}
	wg.Wait()
	ran := 0
	for _, e := range errs {
		if e == nil {
			ran++
		} else if e.Code != CodeNotFound {
			t.Errorf("the losing commit: %+v", e)
		}
	}
	if ran != 1 {
		t.Fatalf("%d of two concurrent commits ran, want exactly 1: %+v", ran, errs)
	}
}
