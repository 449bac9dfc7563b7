package vmtest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// treeFiles are the /proc, /sys and device-tree files hw/sysinfo reads, as
// globs from /: what RecordTree copies out of a board. A glob that matches
// nothing on a board is simply absent from its tree, as on the board.
var treeFiles = []string{
	"proc/cpuinfo", "proc/diskstats", "proc/loadavg", "proc/meminfo", "proc/net/dev", "proc/stat", "proc/uptime",
	"proc/sys/kernel/hostname", "proc/sys/kernel/osrelease",
	"proc/device-tree/compatible", "proc/device-tree/model", "proc/device-tree/serial-number",
	"proc/device-tree/system/linux,revision",
	"sys/block/*/dev",
	"sys/bus/gpio/devices/*/dev", "sys/bus/i2c/devices/*/name",
	"sys/class/gpio/*/base", "sys/class/gpio/*/label", "sys/class/gpio/*/ngpio", "sys/class/gpio/*/device/*/dev",
	"sys/class/hwmon/*/name", "sys/class/hwmon/*/temp*_input", "sys/class/hwmon/*/in*_lcrit_alarm",
	"sys/class/i2c-dev/*/name", "sys/class/pwm/*/npwm", "sys/class/video4linux/*/name",
	"sys/class/thermal/*/temp", "sys/class/thermal/*/type",
	"sys/devices/system/cpu/online", "sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq",
	"sys/devices/platform/soc*/*firmware/get_throttled",
}

// recordScript copies treeFiles into /tmp/rec (cat, not tar: sysfs files
// claim 4096 bytes) and prints them as a base64 tar.gz between markers.
func recordScript() string {
	return `cd /
for f in ` + strings.Join(treeFiles, " ") + `; do
	[ -f "$f" ] || continue
	mkdir -p "/tmp/rec/${f%/*}"
	cat "$f" > "/tmp/rec/$f" 2>/dev/null || rm -f "/tmp/rec/$f"
done
echo PI-TREE-BEGIN
tar -c -C /tmp/rec . | gzip | base64
echo PI-TREE-END
`
}

// RecordTree boots b with nothing but a shell script that copies the files
// hw/sysinfo reads, and writes them under dir (emptied first): the fixture
// trees of the emulated boards are recorded from them, not written by hand.
// The guest is the one make test-pi boots, before any raspi-mcp runs.
func (c *PiCache) RecordTree(ctx context.Context, b PiBoard, dir string) (*PiResult, error) {
	tmp, err := os.MkdirTemp("", "vmtest-record-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	script := filepath.Join(tmp, "record.sh")
	if err := os.WriteFile(script, []byte(recordScript()), 0o755); err != nil {
		return nil, err
	}
	var console bytes.Buffer
	res, err := c.RunPi(ctx, b, PiRunOptions{Files: map[string]string{"record.sh": script}, Command: "sh ./record.sh",
		Timeout: 5 * time.Minute, Console: &console})
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("record.sh exited %d", res.ExitCode)
	}
	if err != nil {
		return res, fmt.Errorf("vmtest: recording %s: %w", b.Name, err)
	}
	return res, extractTree(console.String(), dir)
}

// extractTree decodes the archive between the markers of console into dir.
func extractTree(console, dir string) error {
	_, rest, ok := strings.Cut(console, "PI-TREE-BEGIN")
	body, _, ok2 := strings.Cut(rest, "PI-TREE-END")
	if !ok || !ok2 {
		return errors.New("vmtest: no PI-TREE-BEGIN … PI-TREE-END on the console")
	}
	raw, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(body), ""))
	if err != nil {
		return fmt.Errorf("vmtest: the recorded tree's base64: %w", err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("vmtest: the recorded tree's gzip: %w", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("vmtest: the recorded tree's tar: %w", err)
		}
		name := filepath.Clean(h.Name)
		if name == "." || !filepath.IsLocal(name) {
			continue
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(filepath.Join(dir, name), 0o755)
		case tar.TypeReg:
			var data []byte
			if data, err = io.ReadAll(io.LimitReader(tr, 1<<20)); err == nil {
				if err = os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err == nil {
					err = os.WriteFile(filepath.Join(dir, name), data, 0o644)
				}
			}
		}
		if err != nil {
			return err
		}
	}
}
