package privhelper_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/raspi-mcp/raspi-mcp/privhelper"
	"github.com/raspi-mcp/raspi-mcp/privhelper/client"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

const (
	nobody        = 65534
	envChildSock  = "RASPI_MCP_PRIVHELPER_TEST_SOCKET"
	childTestName = "TestHelperProcessForeignUID"
)

// TestHelperProcessForeignUID is not a test on its own: the uid tests re-exec
// the test binary to run it as another user. It makes one call and prints
// what happened for the parent to check.
func TestHelperProcessForeignUID(t *testing.T) {
	sock := os.Getenv(envChildSock)
	if sock == "" {
		t.Skip("child process of the uid tests; runs only when re-executed by them")
	}
	c := client.New(client.Options{Socket: sock, ClientName: "raspi-mcp/foreign-test", Timeout: hangGuard / 2, DialTimeout: hangGuard / 2})
	defer c.Close()
	_, err := client.Call(context.Background(), c, proto.Status, proto.StatusReq{})
	code := "ok"
	if err != nil {
		code = proto.CodeOf(err)
		fmt.Printf("ERR=%v\n", err)
	}
	fmt.Printf("UID=%d CODE=%s\n", os.Getuid(), code)
}

// runAsNobody runs the client child as uid/gid 65534 against a helper with
// the given policy and returns the child's output and the helper.
func runAsNobody(t *testing.T, pol privhelper.Policy) (string, *helper) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to run the client side as uid 65534 (nobody); " +
			"TestForeignUIDRefusedInProcess covers refusal when not root")
	}
	// go test builds in a 0700 directory, so copy the binary somewhere
	// nobody can reach, and make the socket's directory and file reachable.
	dir := shortDir(t)
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "child.test")
	copyFile(t, self, bin, 0o755)
	sock := filepath.Join(dir, "helper.sock")
	h := startHelper(t, sock, pol)
	if err := os.Chmod(sock, 0o666); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(bin, "-test.run=^"+childTestName+"$", "-test.v")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), envChildSock+"="+sock)
	if os.Getenv("GORACE") == "" {
		cmd.Env = append(cmd.Env, "GORACE=atexit_sleep_ms=0") // a -race child otherwise idles 1 s at exit
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child failed: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), fmt.Sprintf("UID=%d ", nobody)) {
		t.Fatalf("child did not run as uid %d:\n%s", nobody, out)
	}
	return string(out), h
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestForeignUIDRefused(t *testing.T) {
	out, h := runAsNobody(t, powerPolicy(1000, true, false))
	if !strings.Contains(out, "CODE="+proto.CodePermissionDenied) {
		t.Fatalf("foreign uid was not refused:\n%s", out)
	}
	if !strings.Contains(out, fmt.Sprintf("uid %d may not use the helper", nobody)) {
		t.Errorf("refusal does not name the uid:\n%s", out)
	}
	rec := h.logs.find(t, "WARN", "refused connection")
	if rec == nil {
		t.Fatalf("refusal not logged; logs: %v", h.logs.records(t))
	}
	if rec["uid"] != float64(nobody) || rec["gid"] != float64(nobody) || rec["pid"] == float64(0) || rec["pid"] == nil {
		t.Fatalf("refusal log lacks uid/gid/pid: %v", rec)
	}
	if h.logs.find(t, "INFO", "client connected") != nil {
		t.Fatal("foreign client got past hello")
	}
}

func TestAgentUIDAccepted(t *testing.T) {
	out, h := runAsNobody(t, privhelper.Policy{AgentUID: nobody})
	if !strings.Contains(out, "CODE=ok") {
		t.Fatalf("agent uid was refused:\n%s", out)
	}
	rec := h.logs.find(t, "INFO", "client connected")
	if rec == nil || rec["uid"] != float64(nobody) || rec["client"] != "raspi-mcp/foreign-test" {
		t.Fatalf("connection log = %v", rec)
	}
}

// TestOwnUIDAccepted: root is always accepted; a non-root test run checks
// that the configured agent uid is.
func TestOwnUIDAccepted(t *testing.T) {
	pol := privhelper.Policy{AgentUID: 1000}
	if os.Geteuid() != 0 {
		pol.AgentUID = os.Geteuid()
	} else if os.Geteuid() == pol.AgentUID {
		t.Fatal("test policy must not name root as the agent")
	}
	h := startHelper(t, sockIn(t), pol)
	expectStatus(t, newClient(t, h.sock))
	rec := h.logs.find(t, "INFO", "client connected")
	if rec == nil || rec["uid"] != float64(os.Geteuid()) {
		t.Fatalf("connection log = %v", rec)
	}
}

// TestForeignUIDRefusedInProcess is the non-root variant: the test's own uid
// is then foreign to a policy naming another agent.
func TestForeignUIDRefusedInProcess(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root is always accepted; TestForeignUIDRefused re-execs as nobody instead")
	}
	h := startHelper(t, sockIn(t), privhelper.Policy{AgentUID: os.Geteuid() + 1})
	c := newClient(t, h.sock)
	_, err := client.Call(context.Background(), c, proto.Status, proto.StatusReq{})
	protoErr(t, err, proto.CodePermissionDenied)
	if rec := h.logs.find(t, "WARN", "refused connection"); rec == nil || rec["uid"] != float64(os.Geteuid()) {
		t.Fatalf("refusal log = %v", rec)
	}
}
