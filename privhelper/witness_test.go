package privhelper_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/raspi-mcp/raspi-mcp/privhelper"
	"github.com/raspi-mcp/raspi-mcp/privhelper/client"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
	"github.com/raspi-mcp/raspi-mcp/privhelper/witness"
)

func witnessHash(c byte) string { return "sha256:" + strings.Repeat(string(c), 64) }

func startWitnessHelper(t *testing.T, dir string, pol privhelper.Policy, sock string) (*helper, *witness.Log) {
	t.Helper()
	w, err := witness.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return startHelperWith(t, sock, privhelper.Options{Policy: pol, Witness: w}), w
}

func TestAuditWitness(t *testing.T) {
	dir := t.TempDir()
	h, w := startWitnessHelper(t, dir, defaultPolicy(), sockIn(t))
	c := newClient(t, h.sock)
	ctx := context.Background()
	resp, err := client.Call(ctx, c, proto.AuditWitness, proto.AuditWitnessReq{Seq: 4, Hash: witnessHash('a')})
	if err != nil || !resp.Written || resp.Seq != 4 {
		t.Fatalf("witness 4: %+v, %v", resp, err)
	}
	if resp, err := client.Call(ctx, c, proto.AuditWitness, proto.AuditWitnessReq{Seq: 4, Hash: witnessHash('a')}); err != nil || resp.Written {
		t.Fatalf("the same head again: %+v, %v", resp, err)
	}
	// Going backwards, or another hash for the witnessed seq, is refused
	// and names what the witness holds; the file is not touched.
	for _, req := range []proto.AuditWitnessReq{{Seq: 3, Hash: witnessHash('b')}, {Seq: 4, Hash: witnessHash('b')}} {
		_, err := client.Call(ctx, c, proto.AuditWitness, req)
		e := protoErr(t, err, proto.CodeFailedPrecondition)
		if e.Details["witnessed_seq"] != float64(4) || e.Details["witnessed_hash"] != witnessHash('a') {
			t.Fatalf("refusal details = %v", e.Details)
		}
	}
	if h.logs.find(t, "WARN", "audit witness refused") == nil {
		t.Fatal("refused rewind not logged")
	}
	// Bad arguments never reach the file.
	for _, req := range []proto.AuditWitnessReq{{Seq: 0, Hash: witnessHash('a')}, {Seq: 9, Hash: "sha256:00"}, {Seq: 9, Hash: witnessHash('G')}} {
		if err := req.Validate(); err == nil {
			t.Fatalf("%+v validated", req)
		}
		r := dialRaw(t, h.sock)
		r.hello()
		if resp := r.call(proto.AuditWitness.Name, req); resp.Error == nil || resp.Error.Code != proto.CodeInvalidArgument {
			t.Fatalf("%+v: %+v", req, resp)
		}
	}
	if resp, err := client.Call(ctx, c, proto.AuditWitness, proto.AuditWitnessReq{Seq: 9, Hash: witnessHash('c')}); err != nil || !resp.Written {
		t.Fatalf("witness 9: %+v, %v", resp, err)
	}
	if head := w.Head(); head.Seq != 9 {
		t.Fatalf("head = %+v", head)
	}
	f, err := witness.Read(witness.Path(dir))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Points) != 2 || f.Points[0].Seq != 4 || f.Points[1].Seq != 9 || f.Bad != 0 {
		t.Fatalf("witness file = %+v", f)
	}
}

const (
	envWitnessSock = "RASPI_MCP_WITNESS_TEST_SOCKET"
	envWitnessFile = "RASPI_MCP_WITNESS_TEST_FILE"
)

// TestHelperProcessWitnessAsAgent is not a test on its own: it runs re-executed
// as the agent's user (nobody) by TestWitnessNotWritableByAgentUser, tries to
// rewrite the witness every way that user has, and prints what happened.
func TestHelperProcessWitnessAsAgent(t *testing.T) {
	sock, path := os.Getenv(envWitnessSock), os.Getenv(envWitnessFile)
	if sock == "" || path == "" {
		t.Skip("child process of TestWitnessNotWritableByAgentUser; runs only when re-executed by it")
	}
	try := func(name string, err error) {
		if err != nil {
			fmt.Printf("%s=refused: %v\n", name, err)
		} else {
			fmt.Printf("%s=DONE\n", name)
		}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err == nil {
		f.Close()
	}
	try("open-write", err)
	try("truncate", os.Truncate(path, 0))
	try("remove", os.Remove(path))
	try("rename", os.Rename(path, path+".old"))
	try("create-beside", os.WriteFile(filepath.Join(filepath.Dir(path), "x"), nil, 0o644))
	try("chmod", os.Chmod(path, 0o666))
	c := client.New(client.Options{Socket: sock, ClientName: "raspi-mcp/witness-test", Timeout: 5 * time.Second})
	defer c.Close()
	ctx := context.Background()
	_, err = client.Call(ctx, c, proto.AuditWitness, proto.AuditWitnessReq{Seq: 10, Hash: witnessHash('e')})
	fmt.Printf("backwards=%s\n", proto.CodeOf(err))
	_, err = client.Call(ctx, c, proto.AuditWitness, proto.AuditWitnessReq{Seq: 20, Hash: witnessHash('e')})
	fmt.Printf("rehash=%s\n", proto.CodeOf(err))
	_, err = client.Call(ctx, c, proto.AuditWitness, proto.AuditWitnessReq{Seq: 21, Hash: witnessHash('f')})
	fmt.Printf("forward=%s\n", proto.CodeOf(err))
	fmt.Printf("UID=%d\n", os.Getuid())
}

// TestWitnessNotWritableByAgentUser: the agent's user (here nobody, the
// helper's configured agent) can neither write, truncate, replace nor remove
// the witness file, nor make the helper rewind it; it can only move it
// forward, as the agent does after each append.
func TestWitnessNotWritableByAgentUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the helper owns the witness as root and the agent's side runs as uid 65534 (nobody)")
	}
	base := shortDir(t)
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(base, "state") // as systemd's StateDirectory= with mode 0755
	if err := os.Mkdir(state, 0o755); err != nil {
		t.Fatal(err)
	}
	sockDir := filepath.Join(base, "run")
	if err := os.Mkdir(sockDir, 0o777); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(sockDir, "helper.sock")
	h, w := startWitnessHelper(t, state, privhelper.Policy{AgentUID: nobody}, sock)
	if err := os.Chmod(sock, 0o666); err != nil {
		t.Fatal(err)
	}
	if _, _, err := w.Witness(20, witnessHash('d')); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(base, "child.test")
	copyFile(t, self, bin, 0o755)
	cmd := exec.Command(bin, "-test.run=^TestHelperProcessWitnessAsAgent$", "-test.v")
	cmd.Dir = base
	cmd.Env = append(os.Environ(), envWitnessSock+"="+sock, envWitnessFile+"="+witness.Path(state))
	if os.Getenv("GORACE") == "" {
		cmd.Env = append(cmd.Env, "GORACE=atexit_sleep_ms=0")
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child failed: %v\n%s", err, out)
	}
	o := string(out)
	if !strings.Contains(o, fmt.Sprintf("UID=%d\n", nobody)) {
		t.Fatalf("child did not run as uid %d:\n%s", nobody, o)
	}
	for _, attempt := range []string{"open-write", "truncate", "remove", "rename", "create-beside", "chmod"} {
		if !strings.Contains(o, attempt+"=refused") {
			t.Errorf("as the agent's user, %s of the witness was not refused:\n%s", attempt, o)
		}
	}
	for _, want := range []string{"backwards=" + proto.CodeFailedPrecondition, "rehash=" + proto.CodeFailedPrecondition, "forward=\n"} {
		if !strings.Contains(o, want) {
			t.Errorf("child output lacks %q:\n%s", want, o)
		}
	}
	if h.logs.find(t, "WARN", "audit witness refused") == nil {
		t.Error("the rewind attempt is not in the helper's log")
	}
	f, err := witness.Read(witness.Path(state))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Points) != 2 || f.Points[0].Seq != 20 || f.Points[0].Hash != witnessHash('d') || f.Points[1].Seq != 21 || f.Bad != 0 {
		t.Fatalf("witness after the agent's attempts = %+v", f)
	}
}
