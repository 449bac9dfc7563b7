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
	res, _ := r.as(admin, "logs_get_recent_app_logs", map[string]any{"min_level": "warn"})
	out, e := decodeResult[appLogsOut](t, res)
	if e != nil {
		t.Fatal(e)
	}
	got := appLogField(out, func(l appLogEntry) string { return l.Message })
	if len(got) != 2 || got[0] != "helper call failed" || got[1] != "privhelper: refused peer" || out.From != "memory" {
		t.Fatalf("warn and above: %+v", out)
	}
	res, _ = r.as(admin, "logs_get_recent_app_logs", map[string]any{"source": "helper"})
	out, _ = decodeResult[appLogsOut](t, res)
	if got := appLogField(out, func(l appLogEntry) string { return l.Source }); len(got) != 1 || got[0] != "helper" {
		t.Fatalf("helper only: %+v", out)
	}
	res, _ = r.as(admin, "logs_get_recent_app_logs", map[string]any{"min_level": "loud"})
	if _, e := decodeResult[appLogsOut](t, res); e == nil || e.Code != CodeInvalidArgument {
		t.Fatalf("bad level: %+v", e)
	}
}

func TestQueryJournal(t *testing.T) {
	r := newRig(t, nil)
	r.as(admin, "service_control_service", map[string]any{"service_name": "nginx", "action": "restart", "confirm": true, "reason": "journal"})
	res, _ := r.as(admin, "logs_query_journal", map[string]any{"unit": "nginx", "since": "1h"})
	out, e := decodeResult[journalQueryOut](t, res)
	if e != nil {
		t.Fatal(e)
	}
	if out.ReturnedCount == 0 {
		t.Fatalf("no nginx lines after a restart: %+v", out)
	}
	for _, l := range out.Entries {
		if l.Unit != "nginx.service" {
			t.Fatalf("unit filter let %s through", l.Unit)
		}
	}
	res, _ = r.as(admin, "logs_query_journal", map[string]any{"unit": "nginx", "grep": "NO SUCH TEXT ANYWHERE"})
	if out, _ = decodeResult[journalQueryOut](t, res); out.ReturnedCount != 0 {
		t.Fatalf("grep: %+v", out)
	}
	for name, args := range map[string]map[string]any{
		"bad since":      {"since": "yesterday"},
		"since >= until": {"since": "1h", "until": "2h"},
		"option as unit": {"unit": "-f"},
		"bad priority":   {"priority": "loud"},
	} {
		res, _ := r.as(admin, "logs_query_journal", args)
		if _, e := decodeResult[journalQueryOut](t, res); e == nil || e.Code != CodeInvalidArgument {
			t.Errorf("%s: %+v", name, e)
		}
	}
	r.cfg.Logs.JournalUnits = []string{"ssh*"}
	res, _ = r.as(admin, "logs_query_journal", map[string]any{"unit": "nginx"})
	if _, e = decodeResult[journalQueryOut](t, res); e == nil || e.Code != CodePermissionDenied || !strings.Contains(e.FixHint, "journal_units") {
		t.Fatalf("unit outside journal_units: %+v", e)
	}
	res, _ = r.as(admin, "logs_query_journal", map[string]any{})
	out, _ = decodeResult[journalQueryOut](t, res)
	for _, l := range out.Entries {
		if !strings.HasPrefix(l.Unit, "ssh") {
			t.Fatalf("a query without units read %s outside journal_units", l.Unit)
		}
	}
}

// appLogField is one field of every line of a page, oldest first.
func appLogField(out appLogsOut, field func(appLogEntry) string) []string {
	var got []string
	for _, l := range out.Entries {
		got = append(got, field(l))
	}
	return got
}

// Pagination as the other list tools have it: limit, offset, since, until;
// returned_count, has_more, next_offset.
func TestAppLogsPages(t *testing.T) {
	r := newRig(t, nil)
	t0 := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	for i := range 10 {
		r.appLog.Add(applog.Entry{Time: t0.Add(time.Duration(i) * time.Minute), Source: "agent", Level: 8, Message: fmt.Sprintf("line %d", i)})
	}
	page := func(args map[string]any) appLogsOut {
		args["min_level"], args["since"] = "error", t0.Format(time.RFC3339)
		res, _ := r.as(admin, "logs_get_recent_app_logs", args)
		out, e := decodeResult[appLogsOut](t, res)
		if e != nil {
			t.Fatal(e)
		}
		return out
	}
	message := func(l appLogEntry) string { return l.Message }
	out := page(map[string]any{"limit": 4})
	if got := fmt.Sprint(appLogField(out, message)); got != "[line 6 line 7 line 8 line 9]" || !out.HasMore || out.NextOffset != 4 {
		t.Fatalf("first page: %v %+v", got, out)
	}
	out = page(map[string]any{"limit": 4, "offset": 8})
	if got := fmt.Sprint(appLogField(out, message)); got != "[line 0 line 1]" || out.HasMore || out.ReturnedCount != 2 {
		t.Fatalf("last page: %v %+v", got, out)
	}
	out = page(map[string]any{"until": t0.Add(3 * time.Minute).Format(time.RFC3339)})
	if got := fmt.Sprint(appLogField(out, message)); got != "[line 0 line 1 line 2]" {
		t.Fatalf("until: %v", got)
	}
	res, _ := r.as(admin, "logs_get_recent_app_logs", map[string]any{"since": "yesterday"})
	if _, e := decodeResult[appLogsOut](t, res); e == nil || e.Code != CodeInvalidArgument {
		t.Fatalf("bad since: %+v", e)
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
		if err := json.Unmarshal(tl.OutputSchema(), &outSchema); err != nil {
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
