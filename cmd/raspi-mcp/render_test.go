package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// result is a tool result as the agent's pipeline shapes it: the summary
// line, then the JSON, in one text block (agent/tool/pipeline.go).
func result(summary, js string, isError bool) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: isError, Content: []mcp.Content{&mcp.TextContent{Text: summary + "\n" + js}}}
}

// rendered is what v prints for res, checked to fit v.Width.
func rendered(t *testing.T, v callView, res *mcp.CallToolResult) string {
	t.Helper()
	var b bytes.Buffer
	v.render(&b, res)
	for i, l := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
		if n := callLen(l); n > v.Width {
			t.Errorf("line %d is %d columns, over %d: %q", i+1, n, v.Width, l)
		}
	}
	return b.String()
}

func wantLines(t *testing.T, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w+"\n") {
			t.Errorf("no line %q in:\n%s", w, out)
		}
	}
}

// A list tool: its scalar fields aligned, its list of objects a table whose
// columns are the objects' first scalar fields in their order, cut at
// callMaxRows with the count of the rest.
func TestRenderList(t *testing.T) {
	var pins []string
	for i := range 20 {
		pins = append(pins, fmt.Sprintf(`{"pin":%d,"mode":"output","value":"low","allowed":true,"name":"relay-%d","pull":"none","labels":["a","b"]}`, i+2, i))
	}
	js := `{"total_count":20,"has_more":false,"pins":[` + strings.Join(pins, ",") + `]}`
	out := rendered(t, callView{Width: 80, Tool: "gpio_list_pins"}, result("20 allowed pins", js, false))
	wantLines(t, out,
		"20 allowed pins",
		"total_count: 20",
		"has_more:    false",
		"pins (20):",
		"  PIN  MODE    VALUE  ALLOWED  NAME      PULL",
		"  2    output  low    true     relay-0   none",
		"  13   output  low    true     relay-11  none",
		"  (8 more pins; --json shows all)",
		"  (not shown: 1 more fields of each; --json shows all)",
	)
	if strings.Contains(out, "relay-12") {
		t.Errorf("more than %d rows shown:\n%s", callMaxRows, out)
	}
}

// A table drops the columns that do not fit the width, keeping narrower
// ones after them, and cuts a long cell with an ellipsis.
func TestRenderTableWidth(t *testing.T) {
	js := `{"services":[{"name":"a-very-long-unit-name-that-goes-on-and-on.service","description":"` + strings.Repeat("words ", 30) + `","status":"active","pid":12}]}`
	out := rendered(t, callView{Width: 60}, result("1 service", js, false))
	wantLines(t, out,
		"  NAME                                  STATUS  PID",
		"  a-very-long-unit-name-that-goes-on-…  active  12",
		"  (not shown: 1 more fields of each; --json shows all)",
	)
	if strings.Contains(out, "words") {
		t.Errorf("the column that does not fit is shown:\n%s", out)
	}
}

// A detail tool: scalars aligned, byte counts in binary units, nested
// objects one level in, sentences one a line, long values cut at the width.
func TestRenderDetail(t *testing.T) {
	js := `{"pid":1342,"name":"ffmpeg","memory_rss_bytes":186982400,"swap_used_bytes":0,"cmdline":["ffmpeg","-i","x.jpg"],` +
		`"path":"/` + strings.Repeat("d/", 60) + `","cpu_times":{"user":213.24,"system":53.31},"not_visible":["io: permission denied","environment: permission denied"],"open_files":[],"extra":null}`
	out := rendered(t, callView{Width: 80, Tool: "process_get_process_details"}, result("pid 1342 ffmpeg", js, false))
	wantLines(t, out,
		"pid 1342 ffmpeg",
		"pid:              1342",
		"memory_rss_bytes: 178.3 MiB",
		"swap_used_bytes:  0 B",
		"cmdline:          ffmpeg, -i, x.jpg",
		"open_files:       (none)",
		"extra:            -",
		"cpu_times:",
		"  user:   213.24",
		"  system: 53.31",
		"not_visible (2):",
		"  - io: permission denied",
	)
	if !strings.Contains(out, "path:             /d/d/") || !strings.Contains(out, "d/…\n") {
		t.Errorf("long path not cut with an ellipsis at 80 columns:\n%s", out)
	}
}

// An error: its code and message, the fix hint, each suggested call as a
// command line in the CLI's syntax, and for a high-risk call refused for
// want of confirm and reason, the same call again with them.
func TestRenderError(t *testing.T) {
	js := `{"error":{"code":"failed_precondition","message":"process.send_signal is a high-risk action: call it again with confirm: true and a reason",` +
		`"details":{"missing":["confirm","reason"],"risk":"high"},"retryable":false,"fix_hint":"a dry run (dry_run: true) shows what would happen without doing it",` +
		`"suggested_next_tool_calls":[{"tool":"process_send_signal","arguments":{"dry_run":true,"pid":1342,"signal":"SIGTERM"},"why":"see what it would do"},` +
		`{"tool":"manage_preview_os_updates","arguments":{"refresh":false,"note":"it's \"odd\"","filter":{"a":1},"units":["a.service","b.service"]}}]}}`
	v := callView{Width: 80, Tool: "process_send_signal", Args: map[string]any{"pid": 1342.0, "signal": "SIGTERM", "dry_run": false}}
	out := rendered(t, v, result("error failed_precondition: …", js, true))
	wantLines(t, out,
		"error: failed_precondition: process.send_signal is a high-risk action: call it",
		"       again with confirm: true and a reason",
		"fix_hint: a dry run (dry_run: true) shows what would happen without doing it",
		"details:",
		"  missing: confirm, reason",
		"try: raspi-mcp call process_send_signal dry_run=true pid=1342 signal=SIGTERM",
		"     (see what it would do)",
		`try: raspi-mcp call manage_preview_os_updates refresh=false \`,
		`       note='it'\''s "odd"' filter='{"a":1}' units=a.service,b.service`,
		`then: raspi-mcp call process_send_signal pid=1342 signal=SIGTERM confirm=true \`,
		`        reason="…"`,
	)
	if strings.Contains(out, "retryable") {
		t.Errorf("a non-retryable error says retryable:\n%s", out)
	}
}

// An error that is not the pipeline's JSON (an upstream's plain text) is
// shown as it came, wrapped.
func TestRenderPlainError(t *testing.T) {
	out := rendered(t, callView{Width: 40}, &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "upstream said no: " + strings.Repeat("because ", 8)}}})
	if !strings.HasPrefix(out, "upstream said no: because because") || strings.Count(out, "\n") < 2 {
		t.Errorf("plain error:\n%s", out)
	}
}

// change_prepare's token is shown as the command that commits it.
func TestRenderChangePrepare(t *testing.T) {
	js := `{"token":"zd7gWRR1sd9cmfVnVhuKyw","tool":"system_shutdown","tool_id":"system.shutdown","risk":"critical","arguments":{},` +
		`"plan":{"action":"poweroff","plan":["ask systemd-logind to poweroff"]},"plan_hash":"sha256:33e3","expires_at":"2026-12-01T22:37:06Z"}`
	out := rendered(t, callView{Width: 80, Tool: "change_prepare", Prefix: "raspi-mcp call --dir /tmp/x"}, result("prepared system_shutdown", js, false))
	wantLines(t, out,
		"token:      zd7gWRR1sd9cmfVnVhuKyw",
		"arguments:  (none)",
		"plan:",
		"  action: poweroff",
		"  plan (1):",
		"    - ask systemd-logind to poweroff",
		"next: raspi-mcp call --dir /tmp/x change_commit token=zd7gWRR1sd9cmfVnVhuKyw",
		"      (the token works once, until 2026-12-01T22:37:06Z)",
	)
	// Only change_prepare's token is a next step.
	if other := rendered(t, callView{Width: 80, Tool: "system_get_capabilities"}, result("x", js, false)); strings.Contains(other, "next:") {
		t.Errorf("a next line for another tool:\n%s", other)
	}
}

// What a try: line says is what `raspi-mcp call` parses back: the shell's
// words of the line, read by parseArguments with the tool's schema, are
// the suggested arguments.
func TestTryLineRoundTrip(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	tool := &mcp.Tool{Name: "x", InputSchema: map[string]any{"type": "object", "properties": map[string]any{
		"pid": map[string]any{"type": "integer"}, "confirm": map[string]any{"type": "boolean"},
		"reason": map[string]any{"type": "string"}, "pattern": map[string]any{"type": "string"},
		"units":  map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
		"names":  map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
		"filter": map[string]any{"type": "object"},
	}}}
	want := map[string]any{
		"pid": 7.0, "confirm": true, "reason": "hung worker; it's $HOME `x` \"q\"", "pattern": "*nginx*",
		"units": []any{"a.service", "b.service"}, "names": []any{"a,b", "c d"}, "filter": map[string]any{"a": 1.0},
	}
	lines := callView{Width: 200, Prefix: "raspi-mcp call"}.command("try: ", "x", callSorted(want))
	if len(lines) != 1 {
		t.Fatalf("want one line at 200 columns: %q", lines)
	}
	cmdline := strings.TrimPrefix(lines[0], "try: ")
	words, err := exec.Command(sh, "-c", `set -- `+cmdline+`; shift 3; for a in "$@"; do printf '%s\0' "$a"; done`).Output()
	if err != nil {
		t.Fatalf("sh: %v on %s", err, cmdline)
	}
	args := strings.Split(strings.TrimSuffix(string(words), "\x00"), "\x00")
	got, err := parseArguments(tool, args)
	if err != nil {
		t.Fatalf("%s: %v", cmdline, err)
	}
	if !reflect.DeepEqual(got, want) {
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(want)
		t.Errorf("%s\nparsed %s\nwant   %s", cmdline, g, w)
	}
}
