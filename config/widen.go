package config

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// A configuration change over MCP may narrow what a model can do through the
// client's channel, but anything that widens a power needs the owner's
// approval on the device whatever [guard] says. What widens is decided per
// changed key from its old and new value, and anything this file cannot
// show to be narrowing counts as widening: a new kind of key is guarded
// until someone says otherwise here.

// floors are keys whose value is a safety floor: lowering one widens.
var floors = []string{"system.min_power_interval"}

// ceilings are keys whose value bounds what a tool may do or take:
// raising one widens.
var ceilings = []string{"camera.max_image_bytes", "metrics.max_jobs"}

// Widenings lists, in the owner's words, what the change from old to new
// widens; empty when it only narrows (or changes nothing).
func Widenings(old, new Config) []string {
	changes, _ := Diff(old, new)
	var out []string
	for _, ch := range changes {
		if w := widens(ch); w != "" {
			out = append(out, w)
		}
	}
	return out
}

// widens says how one key change widens a power, "" when it narrows.
func widens(ch KeyChange) string {
	var from, to any
	_ = json.Unmarshal([]byte(orNull(ch.From)), &from)
	_ = json.Unmarshal([]byte(orNull(ch.To)), &to)
	switch t := to.(type) {
	case bool:
		if f, _ := from.(bool); t && !f {
			return ch.Key + " turned on"
		}
		return ""
	case []any:
		f, _ := from.([]any)
		var grown []string
		for _, v := range t {
			if !containsJSON(f, v) {
				grown = append(grown, JSONText(v))
			}
		}
		if len(grown) > 0 {
			return fmt.Sprintf("%s grows by %v", ch.Key, grown)
		}
		return ""
	case nil:
		// A key removed falls back to its default, which the Diff
		// already shows when it differs; a removed list narrows.
		if _, isList := from.([]any); isList {
			return ""
		}
	}
	if slices.Contains(floors, ch.Key) {
		if lower(to, from) {
			return fmt.Sprintf("%s lowered from %s to %s", ch.Key, ch.From, ch.To)
		}
		return ""
	}
	if slices.Contains(ceilings, ch.Key) {
		if lower(from, to) {
			return fmt.Sprintf("%s raised from %s to %s", ch.Key, ch.From, ch.To)
		}
		return ""
	}
	return fmt.Sprintf("%s changed from %s to %s", ch.Key, orUnset(ch.From), orUnset(ch.To))
}

// lower reports a < b for numbers or durations as the config writes them.
func lower(a, b any) bool {
	x, ok1 := magnitude(a)
	y, ok2 := magnitude(b)
	return ok1 && ok2 && x < y
}

func magnitude(v any) (float64, bool) {
	switch v := v.(type) {
	case float64:
		return v, true
	case string:
		if d, err := time.ParseDuration(v); err == nil {
			return float64(d), true
		}
	}
	return 0, false
}

func containsJSON(list []any, v any) bool {
	b, _ := json.Marshal(v)
	for _, x := range list {
		if c, _ := json.Marshal(x); string(c) == string(b) {
			return true
		}
	}
	return false
}

func orNull(s string) string {
	if s == "" {
		return "null"
	}
	return s
}

func orUnset(s string) string {
	if s == "" {
		return "(unset)"
	}
	return s
}

// Warnings are settings that are valid but that the owner should make
// knowingly: `raspi-mcp config check` prints them.
func (c Config) Warnings() []string {
	var w []string
	if c.Guard.Critical == ChannelClient {
		w = append(w, `[guard] critical = "client": critical calls (shutdown, OS and raspi-mcp updates, config changes) are approved by the MCP client, `+
			`whose answers (elicitation, change tokens) a model or its client can give itself; "device" asks the owner at the Pi`)
	}
	if c.Guard.Button.Wired() && c.Guard.Critical == ChannelClient && c.Guard.High == ChannelClient {
		w = append(w, fmt.Sprintf("[guard.button] pin %d is wired but no risk goes to the device: it only approves configuration changes that widen a power", c.Guard.Button.Pin))
	}
	return append(w, c.pinWarnings()...)
}
