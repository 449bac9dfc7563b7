package vm

import (
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// The real helper, as root, witnesses every audit record in a root-owned
// file; the agent's user can read it, not write it, and `audit verify`
// compares the chain with it.
func TestAuditWitnessedByTheRootHelper(t *testing.T) {
	_, bus := guest(t)
	r := start(t, bus)
	if isErr, m := r.call(t, "gpio_write_pin", map[string]any{"pin": 5, "value": "high"}); !isErr {
		t.Fatalf("a pin outside the allowlist was written: %v", m)
	}
	path := filepath.Join(helperState, "audit.witness")
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if sys := st.Sys().(*syscall.Stat_t); sys.Uid != 0 || st.Mode().Perm() != 0o644 {
		t.Fatalf("witness owned by uid %d, mode %v; want root, 0644", sys.Uid, st.Mode().Perm())
	}
	out, err := exec.Command(filepath.Join(r.bin, "raspi-mcp"), "audit", "verify", "--config", r.cfg).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "intact") || !strings.Contains(string(out), "witnessed by the helper through seq") {
		t.Fatalf("audit verify: %v\n%s", err, out)
	}
	// As the agent's user: read yes, write or replace no.
	u, err := user.Lookup("raspi-mcp")
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	for _, script := range []string{"cat " + path + " >/dev/null && echo read", "echo 1 >> " + path, "mv " + path + " " + path + ".x", "rm -f " + path} {
		cmd := exec.Command("/bin/sh", "-c", script)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
		out, err := cmd.CombinedOutput()
		if strings.HasPrefix(script, "cat") {
			if err != nil || !strings.Contains(string(out), "read") {
				t.Fatalf("the agent's user cannot read the witness: %v %s", err, out)
			}
		} else if err == nil {
			t.Fatalf("as raspi-mcp, %q succeeded", script)
		}
	}
}
