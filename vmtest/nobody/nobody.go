// Package nobody lets a test inside the VM run part of itself as the
// unprivileged user nobody, the way the agent reads systemd and the journal
// without root.
package nobody

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// Run copies the running test binary where nobody may execute it and runs
// the tests matching pattern in it as nobody, with extra supplementary
// groups and env added to a minimal environment (RASPI_MCP_VM_GUEST=1,
// PATH, HOME). Each output line is logged behind label; a failed run fails t.
func Run(t testing.TB, label, pattern string, env []string, groups ...uint32) {
	t.Helper()
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	dir, err := os.MkdirTemp("", "raspi-mcp-vmtest")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, filepath.Base(os.Args[0]))
	if err := copyExe(os.Args[0], bin); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run", pattern, "-test.v")
	cmd.Dir = dir
	cmd.Env = append([]string{"RASPI_MCP_VM_GUEST=1", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + dir}, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: groups}}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		t.Logf("%s| %s", label, line)
	}
	if err != nil {
		t.Fatalf("the run as %s failed: %v", label, err)
	}
}

func copyExe(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
