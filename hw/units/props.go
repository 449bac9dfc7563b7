package units

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Properties as godbus hands them over: map values are the variants'
// Go values (string, bool, uint32, uint64, []string, [][]any for struct
// arrays). The helpers below never panic on an unexpected type: a
// property systemd renamed or retyped reads as unknown.

func propString(p map[string]any, key string) string {
	s, _ := p[key].(string)
	return s
}

func propBool(p map[string]any, key string) bool {
	b, _ := p[key].(bool)
	return b
}

func propStrings(p map[string]any, key string) []string {
	v, _ := p[key].([]string)
	return slices.Clone(v)
}

// propUint reads an unsigned property; systemd's "not set" (all ones,
// USEC_INFINITY or CGROUP_LIMIT_MAX) reads as 0.
func propUint(p map[string]any, key string) uint64 {
	var u uint64
	switch v := p[key].(type) {
	case uint64:
		u = v
	case uint32:
		if v == math.MaxUint32 {
			return 0
		}
		u = uint64(v)
	case int32:
		u = uint64(max(v, 0))
	case int64:
		u = uint64(max(v, 0))
	}
	if u == math.MaxUint64 {
		return 0
	}
	return u
}

func propInt(p map[string]any, key string) int {
	u := propUint(p, key)
	if u > math.MaxInt32 {
		return 0
	}
	return int(u)
}

// propTime reads a usec-since-epoch timestamp; 0 is "never".
func propTime(p map[string]any, key string) time.Time {
	u := propUint(p, key)
	if u == 0 || u > math.MaxInt64 {
		return time.Time{}
	}
	return time.UnixMicro(int64(u))
}

// unitFromProps builds a Unit from the org.freedesktop.systemd1.Unit
// properties u and the type-specific ones (Service, ...) t; t may be nil.
func unitFromProps(name string, u, t map[string]any) Unit {
	x := Unit{
		Name:          name,
		Description:   propString(u, "Description"),
		LoadState:     propString(u, "LoadState"),
		ActiveState:   propString(u, "ActiveState"),
		SubState:      propString(u, "SubState"),
		UnitFileState: propString(u, "UnitFileState"),
		Preset:        propString(u, "UnitFilePreset"),
		MainPID:       propInt(t, "MainPID"),
		MemoryBytes:   propUint(t, "MemoryCurrent"),
		CPUNanos:      propUint(t, "CPUUsageNSec"),
		Restarts:      propInt(t, "NRestarts"),
		CanStart:      propBool(u, "CanStart"),
		CanStop:       propBool(u, "CanStop"),
		CanReload:     propBool(u, "CanReload"),
	}
	if id := propString(u, "Id"); id != "" {
		x.Name = id // the canonical name when name is an alias
	}
	if isActive(x.ActiveState) {
		x.ActiveSince = propTime(u, "ActiveEnterTimestamp")
	}
	return x
}

// detailFromProps adds a Detail's configuration to unitFromProps.
func detailFromProps(name string, u, t map[string]any) Detail {
	d := Detail{
		Unit:             unitFromProps(name, u, t),
		FragmentPath:     propString(u, "FragmentPath"),
		DropInPaths:      propStrings(u, "DropInPaths"),
		ExecStart:        execCommands(t["ExecStart"]),
		ExecStop:         execCommands(t["ExecStop"]),
		WorkingDirectory: propString(t, "WorkingDirectory"), // systemd writes "!/dir" for "-/dir" (missing is fine)
		User:             propString(t, "User"),
		Group:            propString(t, "Group"),
		Restart:          propString(t, "Restart"),
		Type:             propString(t, "Type"),
		Requires:         propStrings(u, "Requires"),
		Wants:            propStrings(u, "Wants"),
		RequiredBy:       propStrings(u, "RequiredBy"),
		WantedBy:         propStrings(u, "WantedBy"),
		After:            propStrings(u, "After"),
		Before:           propStrings(u, "Before"),
		Environment:      map[string]string{},
	}
	for _, kv := range propStrings(t, "Environment") {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			d.Environment[k] = v
		}
	}
	return d
}

// execCommands renders ExecStart-style properties, a(sasbttttuii): each
// struct is (path, argv, ignore_errors, timestamps..., pid, code,
// status). The command is shown as path followed by argv[1:], arguments
// with spaces or quotes quoted, so it reads like the unit file.
func execCommands(v any) []string {
	var structs [][]any
	switch x := v.(type) {
	case [][]any:
		structs = x
	case []any:
		for _, e := range x {
			if s, ok := e.([]any); ok {
				structs = append(structs, s)
			}
		}
	}
	var out []string
	for _, s := range structs {
		if len(s) < 2 {
			continue
		}
		p, _ := s[0].(string)
		argv, _ := s[1].([]string)
		if p == "" {
			continue
		}
		words := []string{p}
		if len(argv) > 1 {
			for _, a := range argv[1:] {
				words = append(words, quoteArg(a))
			}
		}
		cmd := strings.Join(words, " ")
		if len(s) > 2 {
			if ignore, _ := s[2].(bool); ignore {
				cmd = "-" + cmd
			}
		}
		out = append(out, cmd)
	}
	return out
}

// quoteArg quotes an argument that would not read back as one word.
func quoteArg(a string) string {
	if a != "" && !strings.ContainsAny(a, " \t\n\"'\\") {
		return a
	}
	return strconv.Quote(a)
}
