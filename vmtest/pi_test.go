package vmtest

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestPiPins(t *testing.T) {
	sum := regexp.MustCompile(`^[0-9a-f]{64}$`)
	seen := map[string]bool{}
	for _, p := range PiPackages() {
		key := p.Name + ":" + p.Arch
		if seen[key] {
			t.Errorf("%s pinned twice", key)
		}
		seen[key] = true
		if p.Version == "" || !sum.MatchString(p.SHA256) {
			t.Errorf("%s: version %q, sha256 %q", key, p.Version, p.SHA256)
		}
	}
	if got := piPackage("qemu-system-arm", "amd64").File(); got != "qemu-system-arm_1%3a10.0.2+ds-2+deb13u1~bpo12+1_amd64.deb" {
		t.Errorf("apt-get download names the epoch %%3a: %s", got)
	}
	for _, b := range PiBoards() { // PiBoards panics on a board without pins
		if b.GPIOBase == 0 || (b.GoArch != "armv6" && b.GoArch != "arm64") || b.edit == nil {
			t.Errorf("board %+v", b)
		}
	}
	if _, err := PiBoardNamed("raspi5"); err == nil || !strings.Contains(err.Error(), "raspi0") {
		t.Errorf("unknown board: %v", err)
	}
}

func TestParseXP(t *testing.T) {
	if v, err := parseXP("0000000020200034: 0x00020000\r\n"); err != nil || v != "0x00020000" {
		t.Errorf("got %q, %v", v, err)
	}
	for _, bad := range []string{"", "Cannot access memory\r\n", "0x1"} {
		if v, err := parseXP(bad); err == nil {
			t.Errorf("%q parsed as %q", bad, v)
		}
	}
}

// fakeQMP answers the greeting, qmp_capabilities and one
// human-monitor-command the way QEMU does.
func fakeQMP(t *testing.T, sock string, answer string) {
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		conn.Write([]byte(`{"QMP": {"version": {}, "capabilities": []}}` + "\n"))
		dec := json.NewDecoder(bufio.NewReader(conn))
		for {
			var req struct {
				Execute   string            `json:"execute"`
				Arguments map[string]string `json:"arguments"`
			}
			if dec.Decode(&req) != nil {
				return
			}
			conn.Write([]byte(`{"event": "SOMETHING", "data": {}}` + "\n"))
			switch req.Execute {
			case "human-monitor-command":
				if req.Arguments["command-line"] != "xp /1wx 0x20200034" {
					conn.Write([]byte(`{"error": {"class": "GenericError", "desc": "unexpected"}}` + "\n"))
					continue
				}
				b, _ := json.Marshal(map[string]string{"return": answer})
				conn.Write(append(b, '\n'))
			default:
				conn.Write([]byte(`{"return": {}}` + "\n"))
			}
		}
	}()
}

func TestQMPReadWord(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "q.sock")
	fakeQMP(t, sock, "0000000020200034: 0x00420000\r\n")
	q := &qmpConn{sock: sock}
	defer q.close()
	if v, err := q.readWord("0x20200034"); err != nil || v != "0x00420000" {
		t.Fatalf("got %q, %v", v, err)
	}
	if _, err := q.readWord("0x1"); err == nil || !strings.Contains(err.Error(), "unexpected") {
		t.Fatalf("a QMP error: %v", err)
	}
}

// fakeBoard is a "qemu" that is a shell script, for the console protocol and
// the stall detector; no emulator runs.
func fakeBoard(t *testing.T, script string) (*PiCache, boardFiles, string) {
	t.Helper()
	dir := t.TempDir()
	q := filepath.Join(dir, "qemu")
	if err := os.WriteFile(q, []byte("#!/bin/sh\n"+script), 0o755); err != nil {
		t.Fatal(err)
	}
	c, err := NewPiCache(filepath.Join(dir, "cache"), nil)
	if err != nil {
		t.Fatal(err)
	}
	return c, boardFiles{qemu: q}, dir
}

func TestPiConsoleHandshake(t *testing.T) {
	// The guest asks for a register, gets the answer on its stdin, repeats
	// it and exits 3. The fake QMP server is not there: the answer is an
	// error line, which is what the guest test turns into a failure.
	c, bf, dir := fakeBoard(t, `echo "[ 1.0] booting"
echo "PI-INIT 1.0"
echo "PI-XP? 0x20200034"
read answer
echo "guest got: $answer"
echo "PI-EXIT 3"
`)
	var console strings.Builder
	res := &PiResult{}
	b, _ := PiBoardNamed("raspi0")
	err := c.attempt(context.Background(), b, bf, "", dir, PiRunOptions{Timeout: time.Minute, BootStall: time.Minute, Stall: time.Minute, Console: &console}, res)
	if err != nil || res.ExitCode != 3 || res.Reads != 1 {
		t.Fatalf("err %v, result %+v\n%s", err, res, console.String())
	}
	if !strings.Contains(console.String(), "guest got: PI-XP= 0x20200034 error ") {
		t.Fatalf("the guest got no answer:\n%s", console.String())
	}
}

func TestPiStallDetector(t *testing.T) {
	c, bf, dir := fakeBoard(t, "echo booting; sleep 60\n")
	res := &PiResult{}
	b, _ := PiBoardNamed("raspi0")
	err := c.attempt(context.Background(), b, bf, "", dir, PiRunOptions{Timeout: time.Minute, BootStall: time.Second, Stall: time.Minute, Console: &strings.Builder{}}, res)
	// Killed at the stall: had the script run to its end, qemu's exit
	// would be the error.
	if !errors.Is(err, errStalled) || res.ExitCode != 0 {
		t.Fatalf("err %v, result %+v", err, res)
	}
}

func TestMadisonVersion(t *testing.T) {
	out := ` qemu-system-arm | 1:10.0.3+ds-1~bpo12+1 | http://mirror/debian bookworm-backports/main amd64 Packages
 qemu-system-arm | 1:7.2+dfsg-7+deb12u9 | http://mirror/debian bookworm/main amd64 Packages
`
	if v := madisonVersion(out, "bookworm-backports"); v != "1:10.0.3+ds-1~bpo12+1" {
		t.Errorf("backports: %q", v)
	}
	if v := madisonVersion(out, "bookworm"); v != "1:7.2+dfsg-7+deb12u9" {
		t.Errorf("bookworm: %q", v)
	}
	if v := madisonVersion(out, "trixie"); v != "" {
		t.Errorf("trixie: %q", v)
	}
}

// A successor recorded for a pin serves that pin only: moving the pin (a new
// version) retires it, and a damaged record is an error that says what to do.
func TestPiSuccessors(t *testing.T) {
	c, err := NewPiCache(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	pin := piPackage("busybox-static", "armel")
	next := pin
	next.Version = "1:1.35.0-4+deb12u2"
	if err := c.saveSuccessors(map[string]PiPackage{pin.pinKey(): next}); err != nil {
		t.Fatal(err)
	}
	got, err := c.loadSuccessors()
	if err != nil || got[pin.pinKey()] != next {
		t.Fatalf("round trip: %v, %v", got, err)
	}
	moved := pin
	moved.Version = next.Version
	if _, ok := got[moved.pinKey()]; ok {
		t.Error("a moved pin still finds the old pin's successor")
	}
	if c.use(pin) != pin {
		t.Error("before Fetch, use is the pin itself")
	}
	c.using = map[string]PiPackage{pin.key(): next}
	if c.root(pin) != filepath.Join(c.Dir, "pkg", next.dir()) {
		t.Errorf("root follows the successor: %s", c.root(pin))
	}
	os.WriteFile(c.successorsFile(), []byte("{"), 0o644)
	if _, err := c.loadSuccessors(); err == nil || !strings.Contains(err.Error(), "remove it") {
		t.Errorf("damaged record: %v", err)
	}
}

// The recorded tree comes back from the console as the guest tarred it;
// an entry that would land outside the tree is dropped, and a console
// without the markers is an error.
func TestExtractTree(t *testing.T) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for name, body := range map[string]string{"./proc/device-tree/model": "Raspberry Pi Zero\x00", "../escape": "x"} {
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg})
		tw.Write([]byte(body))
	}
	tw.Close()
	zw.Close()
	enc := base64.StdEncoding.EncodeToString(buf.Bytes())
	console := "[ 1.0] boot\r\nPI-TREE-BEGIN\r\n" + enc[:40] + "\r\n" + enc[40:] + "\r\nPI-TREE-END\r\nPI-EXIT 0\r\n"
	dir := filepath.Join(t.TempDir(), "raspi0")
	if err := extractTree(console, dir); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "proc/device-tree/model")); err != nil || string(b) != "Raspberry Pi Zero\x00" {
		t.Errorf("model %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "escape")); err == nil {
		t.Error("an entry escaped the tree")
	}
	if err := extractTree("PI-EXIT 0", dir); err == nil {
		t.Error("no markers: no error")
	}
	if !strings.Contains(recordScript(), "sys/class/hwmon/*/in*_lcrit_alarm") {
		t.Error("the script does not copy the rpi_volt alarm")
	}
}
