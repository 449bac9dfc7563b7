package units

import (
	"math"
	"slices"
	"testing"
	"time"
)

// Property maps shaped as godbus decodes them (see `busctl introspect
// org.freedesktop.systemd1 /org/freedesktop/systemd1/unit/nginx_2eservice`).
func nginxProps(active string) (u, t map[string]any) {
	u = map[string]any{
		"Id": "nginx.service", "Description": "A high performance web server", "LoadState": "loaded",
		"ActiveState": active, "SubState": "running", "UnitFileState": "enabled", "UnitFilePreset": "enabled",
		"ActiveEnterTimestamp": uint64(1795325967143238), "CanStart": true, "CanStop": true, "CanReload": true,
		"FragmentPath": "/lib/systemd/system/nginx.service", "DropInPaths": []string{"/etc/systemd/system/nginx.service.d/override.conf"},
		"Requires": []string{"system.slice", "sysinit.target"}, "Wants": []string{"network-online.target"},
		"RequiredBy": []string{"webapp.service"}, "WantedBy": []string{"multi-user.target"},
		"After": []string{"network.target"}, "Before": []string{"shutdown.target"},
	}
	t = map[string]any{
		"MainPID": uint32(812), "MemoryCurrent": uint64(12 << 20), "CPUUsageNSec": uint64(math.MaxUint64), "NRestarts": uint32(2),
		"ExecStart":        [][]any{{"/usr/sbin/nginx", []string{"/usr/sbin/nginx", "-g", "daemon on; master_process on;"}, false, uint64(0), uint64(0), uint64(0), uint64(0), uint32(0), int32(0), int32(0)}},
		"ExecStop":         [][]any{{"/sbin/start-stop-daemon", []string{"start-stop-daemon", "--quiet", "--stop"}, true}},
		"WorkingDirectory": "", "User": "www-data", "Group": "", "Restart": "on-failure", "Type": "forking",
		"Environment": []string{"A=1", "TOKEN=abc=def", "bad"},
	}
	return u, t
}

func TestUnitFromProps(t *testing.T) {
	u, ty := nginxProps("active")
	got := unitFromProps("nginx", u, ty)
	want := Unit{Name: "nginx.service", Description: "A high performance web server", LoadState: "loaded", ActiveState: "active",
		SubState: "running", UnitFileState: "enabled", Preset: "enabled", MainPID: 812, MemoryBytes: 12 << 20, CPUNanos: 0,
		ActiveSince: time.UnixMicro(1795325967143238), Restarts: 2, CanStart: true, CanStop: true, CanReload: true}
	if got != want {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	u["ActiveState"] = "inactive"
	if got := unitFromProps("nginx.service", u, ty); !got.ActiveSince.IsZero() {
		t.Error("an inactive unit has an ActiveSince")
	}
	// Unknown or retyped properties read as zero values, never panic.
	odd := unitFromProps("x.service", map[string]any{"Description": 5, "ActiveState": []string{"x"}}, map[string]any{"MainPID": "12", "MemoryCurrent": uint32(math.MaxUint32)})
	if odd.Name != "x.service" || odd.Description != "" || odd.MainPID != 0 || odd.MemoryBytes != 0 {
		t.Errorf("odd properties: %+v", odd)
	}
	if got := unitFromProps("x.service", map[string]any{}, nil); got.Name != "x.service" {
		t.Errorf("nil type properties: %+v", got)
	}
}

func TestDetailFromProps(t *testing.T) {
	u, ty := nginxProps("active")
	d := detailFromProps("nginx.service", u, ty)
	if !slices.Equal(d.ExecStart, []string{`/usr/sbin/nginx -g "daemon on; master_process on;"`}) {
		t.Errorf("ExecStart %q", d.ExecStart)
	}
	if !slices.Equal(d.ExecStop, []string{"-/sbin/start-stop-daemon --quiet --stop"}) {
		t.Errorf("ExecStop %q", d.ExecStop)
	}
	if len(d.Environment) != 2 || d.Environment["TOKEN"] != "abc=def" {
		t.Errorf("Environment %v", d.Environment)
	}
	if d.User != "www-data" || d.Restart != "on-failure" || d.Type != "forking" || d.FragmentPath != "/lib/systemd/system/nginx.service" ||
		!slices.Equal(d.RequiredBy, []string{"webapp.service"}) || !slices.Equal(d.WantedBy, []string{"multi-user.target"}) ||
		!slices.Equal(d.DropInPaths, []string{"/etc/systemd/system/nginx.service.d/override.conf"}) {
		t.Errorf("detail %+v", d)
	}
	// []any-wrapped structs (another godbus decoding) work too.
	if got := execCommands([]any{[]any{"/bin/true", []string{"true", "a b"}, false}}); !slices.Equal(got, []string{`/bin/true "a b"`}) {
		t.Errorf("execCommands %q", got)
	}
	if got := execCommands(nil); got != nil {
		t.Errorf("execCommands(nil) = %q", got)
	}
}

func TestFound(t *testing.T) {
	for _, tc := range []struct {
		load, file, active string
		want               bool
	}{
		{"loaded", "enabled", "active", true},
		{"not-found", "", "inactive", false},
		{"not-found", "", "", false},
		{"not-found", "disabled", "inactive", true}, // a file systemd could not load yet
		{"not-found", "", "active", true},           // file deleted while it runs
		{"masked", "masked", "inactive", true},
	} {
		if got := found(map[string]any{"LoadState": tc.load, "UnitFileState": tc.file, "ActiveState": tc.active}); got != tc.want {
			t.Errorf("found(%+v) = %v", tc, got)
		}
	}
}
