package privhelper_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/privhelper"
	"github.com/raspi-mcp/raspi-mcp/privhelper/client"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

const someHash = "sha256:0000000000000000000000000000000000000000000000000000000000000000"

// configHelper serves a helper whose policy comes from dir/config.toml and
// is rebuilt from it on every reload, as the binary's is.
func configHelper(t *testing.T) (*client.Client, string, func() bool) {
	t.Helper()
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfgPath, []byte("[gpio]\nwrites = false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var writes bool
	load := func() (privhelper.Options, error) {
		c, err := config.Load(cfgPath)
		if err != nil {
			return privhelper.Options{}, err
		}
		writes = c.GPIO.Writes
		pol := defaultPolicy()
		pol.Config.GPIO = c.GPIO
		return privhelper.Options{Policy: pol}, nil
	}
	if _, err := load(); err != nil {
		t.Fatal(err)
	}
	sock := sockIn(t)
	startHelperWith(t, sock, privhelper.Options{Policy: defaultPolicy(), ConfigPath: cfgPath, Reload: load})
	return newClient(t, sock), config.MCPDropInPath(cfgPath), func() bool { return writes }
}

// The helper checks a candidate itself: an agent that skipped its own
// check still cannot set a key that decides who may do what.
func TestConfigApplyRefusesForbiddenKeysOnItsOwn(t *testing.T) {
	c, dropIn, _ := configHelper(t)
	for _, toml := range []string{"[roles]\nusers = { mallory = \"admin\" }\n", "[guard]\nelicitation = \"off\"\n", "[helper]\nagent_user = \"mallory\"\n"} {
		_, err := client.Call(context.Background(), c, proto.ConfigApply, proto.ConfigApplyReq{TOML: toml, DiffHash: someHash})
		protoErr(t, err, proto.CodePermissionDenied)
	}
	_, err := client.Call(context.Background(), c, proto.ConfigApply, proto.ConfigApplyReq{TOML: "[gpio]\nrevert = \"x\"\n", DiffHash: someHash})
	protoErr(t, err, proto.CodeInvalidArgument)
	_, err = client.Call(context.Background(), c, proto.ConfigApply, proto.ConfigApplyReq{TOML: "[gpio]\nwrites = true\n", DiffHash: "md5:x"})
	protoErr(t, err, proto.CodeInvalidArgument)
	if _, err := os.Stat(dropIn); err == nil {
		t.Fatal("a refused candidate was written")
	}
}

func TestConfigApplyAndRestore(t *testing.T) {
	c, dropIn, writes := configHelper(t)
	ctx := context.Background()
	res, err := client.Call(ctx, c, proto.ConfigApply, proto.ConfigApplyReq{TOML: "[gpio]\nwrites = true\n", DiffHash: someHash})
	if err != nil || res.Path != dropIn || res.Generation != 2 || !writes() {
		t.Fatalf("apply: %+v %v (writes %v)", res, err, writes())
	}
	if st, err := os.Stat(dropIn); err != nil || st.Mode().Perm() != 0o644 {
		t.Fatalf("drop-in: %v %v", st, err)
	}
	// A second apply keeps the first as .prev; restore puts it back.
	if _, err := client.Call(ctx, c, proto.ConfigApply, proto.ConfigApplyReq{TOML: "[gpio]\nwrites = false\n", DiffHash: someHash}); err != nil || writes() {
		t.Fatalf("second apply: %v (writes %v)", err, writes())
	}
	r, err := client.Call(ctx, c, proto.ConfigRestore, proto.ConfigRestoreReq{})
	if err != nil || !r.Restored || r.Generation != 4 || !writes() {
		t.Fatalf("restore: %+v %v (writes %v)", r, err, writes())
	}
	if b, _ := os.ReadFile(dropIn); string(b) != "[gpio]\nwrites = true\n" {
		t.Fatalf("restored drop-in = %q", b)
	}
	// Nothing left to undo.
	if r, err := client.Call(ctx, c, proto.ConfigRestore, proto.ConfigRestoreReq{}); err != nil || r.Restored {
		t.Fatalf("second restore: %+v %v", r, err)
	}
}

// The first apply had no file before it: undoing it removes the drop-in.
func TestConfigRestoreOfTheFirstApplyRemovesTheFile(t *testing.T) {
	c, dropIn, writes := configHelper(t)
	ctx := context.Background()
	if _, err := client.Call(ctx, c, proto.ConfigApply, proto.ConfigApplyReq{TOML: "[gpio]\nwrites = true\n", DiffHash: someHash}); err != nil {
		t.Fatal(err)
	}
	if r, err := client.Call(ctx, c, proto.ConfigRestore, proto.ConfigRestoreReq{}); err != nil || !r.Restored || writes() {
		t.Fatalf("restore: %+v %v (writes %v)", r, err, writes())
	}
	if _, err := os.Stat(dropIn); err == nil {
		t.Fatal("the drop-in the first apply created is still there")
	}
}
