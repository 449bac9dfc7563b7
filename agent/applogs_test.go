package agent

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/raspi-mcp/raspi-mcp/agent/applog"
)

func TestRecentAppLogs(t *testing.T) {
	r := newRig(t, nil)
	r.a.log.Warn("helper call failed", "method", "gpio.write")
	r.a.log.Info("all good")
	r.appLog.Add(applog.Entry{Time: time.Now(), Source: "helper", Level: 8, Message: "privhelper: refused peer"})
	res, sc := r.as(admin, "logs_get_recent_app_logs", map[string]any{"min_level": "warn"})
	if res.IsError {
		t.Fatal(sc)
	}
	got := names(sc, "entries", "message")
	if len(got) != 2 || got[0] != "helper call failed" || got[1] != "privhelper: refused peer" || sc["from"] != "memory" {
		t.Fatalf("warn and above: %v", sc)
	}
	_, sc = r.as(admin, "logs_get_recent_app_logs", map[string]any{"source": "helper"})
	if got := names(sc, "entries", "source"); len(got) != 1 || got[0] != "helper" {
		t.Fatalf("helper only: %v", sc)
	}
	if res, sc := r.as(admin, "logs_get_recent_app_logs", map[string]any{"min_level": "loud"}); errCode(res, sc) != CodeInvalidArgument {
		t.Fatalf("bad level: %v", sc)
	}
}

func TestQueryJournal(t *testing.T) {
	r := newRig(t, nil)
	r.as(admin, "service_control_service", map[string]any{"service_name": "nginx", "action": "restart", "confirm": true, "reason": "journal"})
	res, sc := r.as(admin, "logs_query_journal", map[string]any{"unit": "nginx", "since": "1h"})
	if res.IsError {
		t.Fatal(sc)
	}
	if sc["returned_count"].(float64) == 0 {
		t.Fatalf("no nginx lines after a restart: %v", sc)
	}
	for _, u := range names(sc, "entries", "unit") {
		if u != "nginx.service" {
			t.Fatalf("unit filter let %s through", u)
		}
	}
	_, sc = r.as(admin, "logs_query_journal", map[string]any{"unit": "nginx", "grep": "NO SUCH TEXT ANYWHERE"})
	if sc["returned_count"].(float64) != 0 {
		t.Fatalf("grep: %v", sc)
	}
	for name, args := range map[string]map[string]any{
		"bad since":      {"since": "yesterday"},
		"since >= until": {"since": "1h", "until": "2h"},
		"option as unit": {"unit": "-f"},
		"bad priority":   {"priority": "loud"},
	} {
		if res, sc := r.as(admin, "logs_query_journal", args); errCode(res, sc) != CodeInvalidArgument {
			t.Errorf("%s: %v", name, sc)
		}
	}
	r.cfg.Logs.JournalUnits = []string{"ssh*"}
	res, sc = r.as(admin, "logs_query_journal", map[string]any{"unit": "nginx"})
	if errCode(res, sc) != CodePermissionDenied || !strings.Contains(sc["error"].(map[string]any)["fix_hint"].(string), "journal_units") {
		t.Fatalf("unit outside journal_units: %v", sc)
	}
	_, sc = r.as(admin, "logs_query_journal", map[string]any{})
	for _, u := range names(sc, "entries", "unit") {
		if !strings.HasPrefix(u, "ssh") {
			t.Fatalf("a query without units read %s outside journal_units", u)
		}
	}
}

// Pagination as the other list tools have it: limit, offset, since, until;
// returned_count, has_more, next_offset.
func TestAppLogsPages(t *testing.T) {
	r := newRig(t, nil)
	t0 := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	for i := range 10 {
		r.appLog.Add(applog.Entry{Time: t0.Add(time.Duration(i) * time.Minute), Source: "agent", Level: 8, Message: fmt.Sprintf("line %d", i)})
	}
	page := func(args map[string]any) map[string]any {
		args["min_level"], args["since"] = "error", t0.Format(time.RFC3339)
		res, sc := r.as(admin, "logs_get_recent_app_logs", args)
		if res.IsError {
			t.Fatal(sc)
		}
		return sc
	}
	sc := page(map[string]any{"limit": 4})
	if got := fmt.Sprint(names(sc, "entries", "message")); got != "[line 6 line 7 line 8 line 9]" || sc["has_more"] != true || sc["next_offset"].(float64) != 4 {
		t.Fatalf("first page: %v %v", got, sc)
	}
	sc = page(map[string]any{"limit": 4, "offset": 8})
	if got := fmt.Sprint(names(sc, "entries", "message")); got != "[line 0 line 1]" || sc["has_more"] != false || sc["returned_count"].(float64) != 2 {
		t.Fatalf("last page: %v %v", got, sc)
	}
	sc = page(map[string]any{"until": t0.Add(3 * time.Minute).Format(time.RFC3339)})
	if got := fmt.Sprint(names(sc, "entries", "message")); got != "[line 0 line 1 line 2]" {
		t.Fatalf("until: %v", got)
	}
	if res, sc := r.as(admin, "logs_get_recent_app_logs", map[string]any{"since": "yesterday"}); errCode(res, sc) != CodeInvalidArgument {
		t.Fatalf("bad since: %v", sc)
	}
}

// Every tool that pages by offset names it the same way: limit from 1,
// offset from 0, and returned_count, has_more and next_offset in the answer;
// since and until are RFC 3339 times (the journal also takes durations back
// from now, "15m", so its schema cannot say date-time).
func TestPaginationNamesAgree(t *testing.T) {
	r := newRig(t, nil)
	paged := 0
	for _, tl := range r.a.tools.All() {
		var outSchema jsonschema.Schema
		if err := json.Unmarshal(tl.MCP().OutputSchema.(json.RawMessage), &outSchema); err != nil {
			t.Fatalf("%s: output schema: %v", tl.Name(), err)
		}
		in, out := tl.Input().Tree.Properties, outSchema.Properties
		if off, ok := in["offset"]; ok {
			paged++
			if lim := in["limit"]; lim == nil || lim.Minimum == nil || *lim.Minimum != 1 || off.Minimum == nil || *off.Minimum != 0 {
				t.Errorf("%s: limit/offset bounds", tl.Name())
			}
			for _, k := range []string{"returned_count", "has_more", "next_offset"} {
				if _, ok := out[k]; !ok {
					t.Errorf("%s pages by offset but answers no %s", tl.Name(), k)
				}
			}
		}
		for _, k := range []string{"since", "until"} {
			if p, ok := in[k]; ok && p.Format != "date-time" && tl.ID() != "logs.query_journal" {
				t.Errorf("%s: %s is not a date-time", tl.Name(), k)
			}
		}
	}
	if paged < 4 {
		t.Fatalf("only %d tools page by offset", paged)
	}
}
