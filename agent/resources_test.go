package agent

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/agent/tool"
	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/internal/identity"
)

// hang guards only: no verdict depends on how long anything takes.
const resHang = 90 * time.Second

func readText(t *testing.T, s *mcp.ClientSession, uri string) string {
	t.Helper()
	res, err := s.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatalf("read %s: %v", uri, err)
	}
	if len(res.Contents) != 1 || res.Contents[0].Text == "" {
		t.Fatalf("read %s: contents %+v", uri, res.Contents)
	}
	return res.Contents[0].Text
}

func TestResourcesListReadSubscribe(t *testing.T) {
	for _, era := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(era, func(t *testing.T) { testResources(t, era) })
	}
}

func testResources(t *testing.T, era string) {
	r := newSimRig(t, nil)
	r.a.updates.every, r.a.updates.gap = 20*time.Millisecond, 0
	updated := make(chan string, 100)
	s := r.serveMany()(&mcp.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
		updated <- req.Params.URI
	}}, era)
	ctx := context.Background()
	if got := s.InitializeResult().ProtocolVersion; got != era {
		t.Fatalf("negotiated %s, want %s", got, era)
	}

	init := s.InitializeResult().Capabilities
	if init.Resources == nil || !init.Resources.Subscribe || init.Prompts == nil || init.Completions == nil {
		t.Fatalf("capabilities %+v: want resources with subscribe, prompts and completions", init)
	}
	lr, err := s.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*mcp.Resource{}
	for _, res := range lr.Resources {
		got[res.URI] = res
	}
	for _, u := range []string{uriSummary, uriContract, uriHealth, uriPins, uriConfig, uriAudit} {
		res, ok := got[u]
		if !ok || res.Title == "" || res.Description == "" || res.MIMEType == "" {
			t.Errorf("resource %s listed as %+v", u, res)
		}
	}
	lt, err := s.ListResourceTemplates(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var tmpls []string
	for _, rt := range lt.ResourceTemplates {
		tmpls = append(tmpls, rt.URITemplate)
	}
	for _, want := range []string{tmplMetric, tmplService, tmplJournal} {
		if !slices.Contains(tmpls, want) {
			t.Errorf("templates %v lack %s", tmpls, want)
		}
	}

	sum := readText(t, s, uriSummary)
	var st stateSummary
	if err := json.Unmarshal([]byte(sum), &st); err != nil {
		t.Fatal(err)
	}
	t.Logf("summary: %d bytes, ~%d tokens: %s", len(sum), len(sum)/4, sum)
	if len(sum) >= 1500 {
		t.Errorf("summary is %d bytes, want < 1500", len(sum))
	}
	if st.Model == "" || st.Helper != "up" || st.Throttle == nil || st.Throttle.Now == nil || len(*st.Throttle.Now) != 0 ||
		st.Throttle.SinceBoot == nil || !slices.Contains(*st.Throttle.SinceBoot, "under_voltage") || st.Throttle.Src != "sim" || !slices.Contains(st.Domains, "gpio") {
		t.Errorf("summary %+v", st)
	}

	contract := readText(t, s, uriContract)
	for _, want := range []string{"system_reboot", "system_shutdown", "change_prepare", "suggested_next_tool_calls", uriSummary, strings.Split(instructions, "\n")[0]} {
		if !strings.Contains(contract, want) {
			t.Errorf("contract lacks %q", want)
		}
	}
	var pins gpioListOut
	if err := json.Unmarshal([]byte(readText(t, s, uriPins)), &pins); err != nil || len(pins.Pins) != len(r.cfg.GPIO.Pins) {
		t.Errorf("pins %+v, %v", pins, err)
	}
	if h := readText(t, s, uriHealth); !strings.Contains(h, "cpu_usage_percent") {
		t.Errorf("health %s", h)
	}
	if c := readText(t, s, uriConfig); !strings.Contains(c, "relay") {
		t.Errorf("config %s", c)
	}
	readText(t, s, uriAudit)
	if m := readText(t, s, "raspi://metrics/cpu_percent?window=15m&resolution=1m"); !strings.Contains(m, "cpu_percent") {
		t.Errorf("metric %s", m)
	}
	if sv := readText(t, s, "raspi://service/nginx"); !strings.Contains(sv, "nginx.service") {
		t.Errorf("service %s", sv)
	}
	readText(t, s, "raspi://journal/nginx.service?lines=5")
	_, err = s.ReadResource(ctx, &mcp.ReadResourceParams{URI: "raspi://service/ssh.service"})
	if te := resErr(t, err); te.Code != CodePermissionDenied {
		t.Errorf("a unit outside [service] allow: %+v", te)
	}
	_, err = s.ReadResource(ctx, &mcp.ReadResourceParams{URI: "raspi://metrics/cpu_percent?window=forever"})
	if te := resErr(t, err); te.Code != CodeInvalidArgument {
		t.Errorf("bad window: %+v", te)
	}

	if err := s.Subscribe(ctx, &mcp.SubscribeParams{URI: uriSummary}); err != nil {
		t.Fatal(err)
	}
	if err := s.Subscribe(ctx, &mcp.SubscribeParams{URI: uriHealth}); err != nil {
		t.Fatal(err)
	}
	if era < "2026" { // a listen stream's refusal does not come back from Subscribe
		if err := s.Subscribe(ctx, &mcp.SubscribeParams{URI: "raspi://metrics/nonsense"}); resErr(t, err).Code != CodeInvalidArgument {
			t.Errorf("subscribing to an unknown metric: %v", err)
		}
		if err := s.Subscribe(ctx, &mcp.SubscribeParams{URI: uriContract}); resErr(t, err).Code != CodeInvalidArgument {
			t.Errorf("subscribing to the contract: %v", err)
		}
	}
	// The watcher's first pass is its baseline; wait until it has one so
	// the flip below is news, not the start.
	waitFor(t, "the watcher's baseline", resHang, func() bool {
		r.a.updates.mu.Lock()
		defer r.a.updates.mu.Unlock()
		return r.a.updates.primed
	})
	r.sim.Agent.Sys.SetThrottle(1<<16 | 1<<18 | 1<<2) // throttled now
	want := map[string]bool{uriSummary: true, uriHealth: true}
	deadline := time.After(resHang)
	for len(want) > 0 {
		select {
		case u := <-updated:
			delete(want, u)
		case <-deadline:
			t.Fatalf("no update for %v after throttling started", want)
		}
	}
	if err := json.Unmarshal([]byte(readText(t, s, uriSummary)), &st); err != nil || st.Throttle.Now == nil || !slices.Contains(*st.Throttle.Now, "throttled") {
		t.Errorf("summary after the flip: %+v, %v", st.Throttle, err)
	}
}

// resErr is the error object a refused read, subscription or prompt carries.
func resErr(t *testing.T, err error) tool.Error {
	t.Helper()
	var we *jsonrpc.Error
	if !errors.As(err, &we) {
		t.Fatalf("want a JSON-RPC error, got %v", err)
	}
	var d struct {
		ErrorCode string     `json:"error_code"`
		Error     tool.Error `json:"error"`
	}
	if err := json.Unmarshal(we.Data, &d); err != nil || d.ErrorCode != d.Error.Code {
		t.Fatalf("error data %s: %v", we.Data, err)
	}
	return d.Error
}

// A resource is refused exactly as its tool is: same code, message and hint.
func TestResourceRefusedLikeItsTool(t *testing.T) {
	r := newSimRig(t, func(c *config.Config) { c.GPIO.Enabled = false })
	s := r.serve()
	ctx := context.Background()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "gpio_list_pins", Arguments: map[string]any{}})
	if err != nil || !res.IsError {
		t.Fatalf("tool: %v %+v", err, res)
	}
	js, _ := json.Marshal(res.Meta["error"])
	var tool tool.Error
	_ = json.Unmarshal(js, &tool)
	_, err = s.ReadResource(ctx, &mcp.ReadResourceParams{URI: uriPins})
	got := resErr(t, err)
	if got.Code != CodePermissionDenied || got.Code != tool.Code || got.Message != tool.Message || got.FixHint != tool.FixHint {
		t.Errorf("resource refused with %+v, tool with %+v", got, tool)
	}
	// The summary leaves the part out and says so, rather than failing.
	var st stateSummary
	_ = json.Unmarshal([]byte(readText(t, s, uriSummary)), &st)
	if slices.Contains(st.Domains, "gpio") {
		t.Errorf("summary says gpio is on: %+v", st)
	}
	// A switched-off domain refuses the subscription the same way.
	r2 := newSimRig(t, func(c *config.Config) { c.Metrics.Enabled = false })
	s2 := r2.serveMany()(nil, "2025-11-25")
	if te := resErr(t, s2.Subscribe(ctx, &mcp.SubscribeParams{URI: "raspi://metrics/cpu_percent"})); te.Code != CodePermissionDenied {
		t.Errorf("subscription with metrics off: %+v", te)
	}
}

func TestPrompts(t *testing.T) {
	r := newSimRig(t, nil)
	s := r.serve()
	ctx := context.Background()
	lp, err := s.ListPrompts(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range lp.Prompts {
		names = append(names, p.Name)
	}
	for _, want := range []string{"diagnose_throttling", "why_did_it_reboot", "triage_failed_unit", "safe_gpio_change", "weekly_health_report"} {
		if !slices.Contains(names, want) {
			t.Errorf("prompts %v lack %s", names, want)
		}
	}
	get := func(name string, args map[string]string) string {
		t.Helper()
		res, err := s.GetPrompt(ctx, &mcp.GetPromptParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return res.Messages[0].Content.(*mcp.TextContent).Text
	}
	if txt := get("triage_failed_unit", map[string]string{"unit": "nginx"}); !strings.Contains(txt, `"service_name": "nginx.service"`) ||
		!strings.Contains(txt, "service_get_status") || !strings.Contains(txt, "service_control_service") {
		t.Errorf("triage_failed_unit: %s", txt)
	}
	if txt := get("safe_gpio_change", map[string]string{"pin": "relay"}); !strings.Contains(txt, "GPIO17") || !strings.Contains(txt, "gpio_write_pin") {
		t.Errorf("safe_gpio_change: %s", txt)
	}
	if txt := get("diagnose_throttling", nil); !strings.Contains(txt, "metrics_get_summary") || !strings.Contains(txt, uriSummary) {
		t.Errorf("diagnose_throttling: %s", txt)
	}
	get("why_did_it_reboot", nil)
	get("weekly_health_report", nil)
	_, err = s.GetPrompt(ctx, &mcp.GetPromptParams{Name: "safe_gpio_change", Arguments: map[string]string{"pin": "5"}})
	if te := resErr(t, err); te.Code != CodeInvalidArgument {
		t.Errorf("pin off the allowlist: %+v", te)
	}
	_, err = s.GetPrompt(ctx, &mcp.GetPromptParams{Name: "triage_failed_unit"})
	if te := resErr(t, err); te.Code != CodeInvalidArgument {
		t.Errorf("missing unit: %+v", te)
	}
}

func TestCompletionsOnlyAllowlisted(t *testing.T) {
	r := newSimRig(t, nil)
	s := r.serve()
	ctx := context.Background()
	complete := func(ref *mcp.CompleteReference, arg, typed string) []string {
		t.Helper()
		res, err := s.Complete(ctx, &mcp.CompleteParams{Ref: ref, Argument: mcp.CompleteParamsArgument{Name: arg, Value: typed}})
		if err != nil {
			t.Fatalf("complete %s: %v", arg, err)
		}
		return res.Completion.Values
	}
	pins := complete(&mcp.CompleteReference{Type: "ref/prompt", Name: "safe_gpio_change"}, "pin", "")
	var want []string
	for _, p := range r.cfg.GPIO.Pins {
		want = append(want, strconv.Itoa(p.Pin), p.Name)
	}
	if !slices.Equal(pins, want) {
		t.Errorf("pins %v, want %v", pins, want)
	}
	if got := complete(&mcp.CompleteReference{Type: "ref/prompt", Name: "safe_gpio_change"}, "pin", "1"); !slices.Equal(got, []string{"17", "18"}) {
		t.Errorf("pins starting with 1: %v", got)
	}
	all, err := r.units.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	outside := 0
	for _, u := range all {
		if !config.UnitMatches(r.cfg.Service.Allow, u.Name) {
			outside++
		}
	}
	if outside == 0 {
		t.Fatal("the sim board has no unit outside [service] allow: the test would prove nothing")
	}
	for _, ref := range []*mcp.CompleteReference{{Type: "ref/prompt", Name: "triage_failed_unit"}, {Type: "ref/resource", URI: tmplService}} {
		units := complete(ref, "unit", "")
		if len(units) == 0 {
			t.Errorf("%+v: no units", ref)
		}
		for _, u := range units {
			if !config.UnitMatches(r.cfg.Service.Allow, u) {
				t.Errorf("%+v offers %s, outside [service] allow", ref, u)
			}
		}
	}
	if got := complete(&mcp.CompleteReference{Type: "ref/resource", URI: tmplMetric}, "metric", "cpu_"); !slices.Contains(got, "cpu_percent") {
		t.Errorf("metrics: %v", got)
	}
	if got := complete(&mcp.CompleteReference{Type: "ref/prompt", Name: "x"}, "sensor", ""); !slices.Equal(got, []string{"greenhouse", "case"}) {
		t.Errorf("sensors: %v", got)
	}
}

// BenchmarkSummary reports the summary resource's size, the number a
// model's context pays for it.
func BenchmarkSummary(b *testing.B) {
	r := newSimRig(b, nil)
	var n int
	for b.Loop() {
		js, _ := json.Marshal(r.a.newResources().stateSummary(context.Background(), admin))
		n = len(js)
	}
	b.ReportMetric(float64(n), "bytes")
	b.ReportMetric(float64(n)/4, "tokens")
}

// The watcher turns each kind of news into updates of the right resources,
// and coalesces: within the gap one resource is updated at most once, and a
// change inside the gap is sent when it ends. Times are given, not waited for.
func TestWatcherNewsAndRateLimit(t *testing.T) {
	r := newSimRig(t, nil)
	w := r.a.updates
	var sent []string
	w.send = func(_ context.Context, uri string) { sent = append(sent, uri) }
	w.gap = 10 * time.Second
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	step := func(now time.Time, want ...string) {
		t.Helper()
		sent = nil
		w.tick(ctx, now)
		if !slices.Equal(sent, want) {
			t.Fatalf("at %s: sent %v, want %v", now.Sub(t0), sent, want)
		}
	}
	step(at(0)) // nobody subscribed: nothing is read
	w.subs[uriSummary], w.subs[uriHealth] = 1, 1
	step(at(500 * time.Millisecond)) // baseline: nothing is news
	step(at(time.Second))
	r.sim.Agent.Sys.SetThrottle(1 | 1<<16) // under-voltage starts
	step(at(2*time.Second), uriHealth, uriSummary)
	r.sim.Agent.Sys.SetThrottle(1 << 16) // and ends, inside the gap
	step(at(3 * time.Second))
	step(at(11 * time.Second))
	step(at(12*time.Second), uriHealth, uriSummary) // coalesced into one
	step(at(13 * time.Second))

	r.killHelper()
	step(at(30*time.Second), uriHealth, uriSummary)
	r.startHelper()
	step(at(45*time.Second), uriHealth, uriSummary)

	// bluetooth.service (no Restart=) loses its main process to SIGKILL: failed.
	bt, err := r.units.Get(ctx, "bluetooth.service")
	if err != nil || bt.MainPID == 0 {
		t.Fatalf("bluetooth.service: %+v %v", bt, err)
	}
	if err := r.units.MainExited(ctx, "bluetooth.service", bt.MainPID, "KILL"); err != nil {
		t.Fatal(err)
	}
	step(at(60*time.Second), uriHealth, uriSummary)

	// A lease starts (and later reverts), a reboot is scheduled a minute ahead: summary news.
	if res, sc := r.as(admin, "gpio_write_pin", map[string]any{"pin": 17, "value": "high", "duration_ms": 600000}); res.IsError {
		t.Fatalf("lease: %v", sc)
	}
	step(at(75*time.Second), uriSummary)
	if res, sc := r.as(admin, "system_reboot", map[string]any{"delay_seconds": 60, "confirm": true, "reason": "test"}); res.IsError {
		t.Fatalf("reboot: %v", sc)
	}
	step(at(90*time.Second), uriSummary)

	// A metric resource is news when new samples were taken.
	w.subs["raspi://metrics/cpu_percent"] = 1
	w.prev.samples--
	step(at(105*time.Second), "raspi://metrics/cpu_percent")
}

// The effective configuration shows an upstream's token only as its reference.
func TestConfigShowsSecretReferencesOnly(t *testing.T) {
	t.Setenv("HS4_TOKEN", "s3cret-value")
	r := newSimRig(t, func(c *config.Config) {
		c.Upstreams = []config.Upstream{{Name: "hs4", URL: "http://127.0.0.1:1/mcp", Token: "env:HS4_TOKEN"}}
	})
	ctx := identity.NewContext(context.Background(), admin)
	text, err := r.a.newResources().readConfig(ctx, &mcp.ReadResourceRequest{Params: &mcp.ReadResourceParams{URI: uriConfig}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "env:HS4_TOKEN") || strings.Contains(text, "s3cret") {
		t.Errorf("config: %s", text)
	}
	reader := Principal{Name: "bob", UID: 1001, Role: RoleRead}
	r.cfg.Manage.Enabled = false
	_, err = r.a.newResources().readConfig(identity.NewContext(context.Background(), reader), &mcp.ReadResourceRequest{Params: &mcp.ReadResourceParams{URI: uriConfig}})
	if te := resErr(t, err); te.Code != CodePermissionDenied {
		t.Errorf("with manage off: %+v", te)
	}
}

// A LAN upstream's resources and prompts are mounted beside ours, and one
// whose mounted name equals a local prompt's does not replace it.
func TestLocalAndUpstreamExtrasCoexist(t *testing.T) {
	f := newFakeLAN(t)
	f.srv.AddResource(&mcp.Resource{URI: "demo://x", Name: "x", MIMEType: "text/plain"}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "upstream x"}}}, nil
	})
	f.srv.AddPrompt(&mcp.Prompt{Name: "failed_unit"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "upstream prompt"}}}}, nil
	})
	f.srv.AddPrompt(&mcp.Prompt{Name: "scenes"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "upstream scenes"}}}}, nil
	})
	r := newRig(t, func(c *config.Config) {
		c.Upstreams = []config.Upstream{{Name: "triage", URL: "http://" + f.addr + "/mcp", Timeout: config.Duration(10 * time.Second)}}
	})
	s := r.serve()
	ctx := context.Background()
	waitFor(t, "the upstream's prompt", resHang, func() bool {
		lp, err := s.ListPrompts(ctx, nil)
		return err == nil && slices.ContainsFunc(lp.Prompts, func(p *mcp.Prompt) bool { return p.Name == "triage_scenes" })
	})
	if txt := readText(t, s, "triage+demo://x"); txt != "upstream x" {
		t.Errorf("upstream resource: %q", txt)
	}
	readText(t, s, uriSummary)
	res, err := s.GetPrompt(ctx, &mcp.GetPromptParams{Name: "triage_failed_unit", Arguments: map[string]string{"unit": "nginx"}})
	if err != nil || !strings.Contains(res.Messages[0].Content.(*mcp.TextContent).Text, "service_get_status") {
		t.Errorf("triage_failed_unit is no longer ours: %+v %v", res, err)
	}
	if got := completionValues(t, s, &mcp.CompleteReference{Type: "ref/prompt", Name: "x"}, "upstream"); !slices.Equal(got, []string{"triage"}) {
		t.Errorf("upstream completion: %v", got)
	}
}

func completionValues(t *testing.T, s *mcp.ClientSession, ref *mcp.CompleteReference, arg string) []string {
	t.Helper()
	res, err := s.Complete(context.Background(), &mcp.CompleteParams{Ref: ref, Argument: mcp.CompleteParamsArgument{Name: arg}})
	if err != nil {
		t.Fatal(err)
	}
	return res.Completion.Values
}

// Every call a prompt spells out names a registered tool with arguments its
// schema accepts, so a model following the recipe is not refused for a typo.
func TestPromptCallsValidate(t *testing.T) {
	r := newSimRig(t, nil)
	call := regexp.MustCompile(`(?:Call|call) ([a-z_]+) with (\{[^}]*\})`)
	args := map[string]map[string]string{"triage_failed_unit": {"unit": "nginx"}, "safe_gpio_change": {"pin": "17"}}
	checked := 0
	for _, d := range r.a.prompts().defs() {
		text, err := d.text(args[d.p.Name])
		if err != nil {
			t.Fatalf("%s: %v", d.p.Name, err)
		}
		for _, m := range call.FindAllStringSubmatch(text, -1) {
			tl, ok := r.a.tools.Lookup(m[1])
			if !ok {
				t.Errorf("%s names %s, which is not a tool", d.p.Name, m[1])
				continue
			}
			if !json.Valid([]byte(m[2])) {
				continue // a placeholder the model fills in ("high" or "low")
			}
			if _, terr := tl.Check(json.RawMessage(m[2])); terr != nil {
				t.Errorf("%s: %s %s: %s", d.p.Name, m[1], m[2], terr.Message)
			}
			checked++
		}
	}
	if checked < 8 {
		t.Errorf("only %d calls checked", checked)
	}
}
