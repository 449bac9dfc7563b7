package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/raspi-mcp/raspi-mcp/agent/tool"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/internal/identity"
)

// sessionIn is a real MCP client session as principal p in protocol era
// era (""; the client's choice), over in-memory transports as r.session
// is, with the client's options (list_changed handlers).
func (r *rig) sessionIn(t testing.TB, p Principal, era string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := r.a.server.Connect(identity.NewContext(ctx, p), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	var so *mcp.ClientSessionOptions
	if era != "" {
		so = &mcp.ClientSessionOptions{ProtocolVersion: era}
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, opts).Connect(ctx, ct, so)
	if err != nil {
		t.Fatal(err)
	}
	if got := cs.InitializeResult().ProtocolVersion; era != "" && got != era {
		t.Fatalf("negotiated %s, want %s", got, era)
	}
	t.Cleanup(func() { cs.Close(); ss.Wait() })
	return cs
}

// defaultSwitches sets every switch of the table to its value in a fresh
// install (config.Default()), leaving the rig's paths and allowlists.
func defaultSwitches(c *config.Config) {
	def := config.Default()
	for _, s := range config.Switches() {
		s.Set(c, s.On(&def))
	}
}

// TestMeasureToolsList prints what tools/list costs each principal: the
// number of tools, the bytes of the result and the allocations of the
// policy filter, for the laptop config (every switch on) and the default
// one. It asserts nothing; -v shows the MEASURE lines, and with
// RASPI_MCP_MEASURE=1 the filter's time and a whole in-memory tools/list
// round trip's (some 20 s of benchmarks):
//
//	RASPI_MCP_MEASURE=1 go test -count=1 -run TestMeasureToolsList -v ./agent
func TestMeasureToolsList(t *testing.T) {
	for _, c := range []struct {
		name string
		mod  func(*config.Config)
		who  []Principal
	}{
		{"laptop", nil, []Principal{admin, operator, reader}},
		{"default", defaultSwitches, []Principal{admin, operator, reader}},
	} {
		r := newRig(t, c.mod)
		for _, p := range c.who {
			res, err := r.sessionIn(t, p, "2025-11-25", nil).ListTools(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			b, err := json.Marshal(res)
			if err != nil {
				t.Fatal(err)
			}
			all := r.a.tools.All()
			allocs := testing.AllocsPerRun(20, func() {
				for _, tl := range all {
					r.a.lists.tool(p, tl.Name())
				}
			})
			timing := ""
			if os.Getenv("RASPI_MCP_MEASURE") != "" {
				filter := testing.Benchmark(func(b *testing.B) {
					for range b.N {
						for _, tl := range all {
							r.a.lists.tool(p, tl.Name())
						}
					}
				})
				list := testing.Benchmark(func(b *testing.B) {
					s := r.sessionIn(b, p, "2025-11-25", nil)
					b.ResetTimer()
					for range b.N {
						if _, err := s.ListTools(context.Background(), nil); err != nil {
							b.Fatal(err)
						}
					}
				})
				timing = fmt.Sprintf(" filter=%s list_round_trip=%s", time.Duration(filter.NsPerOp()), time.Duration(list.NsPerOp()))
			}
			t.Logf("MEASURE config=%s role=%s tools=%d bytes=%d filter_allocs=%.0f%s", c.name, p.Role, len(res.Tools), len(b), allocs, timing)
		}
	}
}

// listedTools is the wire names p is listed, every page.
func listedTools(t testing.TB, s *mcp.ClientSession) map[string]bool {
	t.Helper()
	got := map[string]bool{}
	for tl, err := range s.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		got[tl.Name] = true
	}
	return got
}

// mayNames is what the pipeline's May lets p call, by wire name: what a
// shaped tools/list must equal.
func mayNames(r *rig, p Principal) map[string]bool {
	want := map[string]bool{}
	critical := false
	for _, tl := range r.a.tools.All() {
		if r.a.pipe.May(p, tl.ID()) == nil {
			want[tl.Name()] = true
			critical = critical || tl.Rule().Risk == tool.RiskCritical
		}
	}
	if !critical { // change_* serve critical calls only
		delete(want, "change_prepare")
		delete(want, "change_commit")
	}
	return want
}

// change_prepare and change_commit are listed only to a caller who may
// call some critical tool: not to a reader, nor to an operator while every
// critical switch is off; an admin with shutdown on sees them. A call of
// them is still decided as before (a reader's prepare is refused by the
// tool it names).
func TestChangeToolsListedOnlyWithACriticalTool(t *testing.T) {
	r := newRig(t, func(c *config.Config) { c.System.Shutdown = false; c.System.Reboot = false })
	for _, era := range eras {
		for _, c := range []struct {
			p    Principal
			want bool
		}{{reader, false}, {admin, true}} {
			got := listedTools(t, r.sessionIn(t, c.p, era, nil))
			if got["change_prepare"] != c.want || got["change_commit"] != c.want {
				t.Errorf("%s %s: change_prepare %v, change_commit %v, want %v", era, c.p.Role, got["change_prepare"], got["change_commit"], c.want)
			}
		}
	}
	_, e := callAs[changePrepareOut](t, r, reader, "change_prepare", map[string]any{"tool": "system_shutdown"})
	if e == nil {
		t.Fatal("a reader prepared a shutdown")
	}
}

// A read principal is listed no write tool, an operator no admin tool and
// no tool whose switch is off, an admin with everything on every tool; in
// both eras, and each list is exactly what May allows.
func TestToolsListShapedByRoleAndSwitches(t *testing.T) {
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			r := newRig(t, gpioWritesOff)
			all := len(r.a.tools.All())
			for _, p := range []Principal{admin, operator, reader} {
				got := listedTools(t, r.sessionIn(t, p, era, nil))
				diff(t, p.Role.String()+"'s tools", mayNames(r, p), got)
				for name := range got {
					tl, _ := r.a.tools.Lookup(name)
					if tl.Rule().MinRole > p.Role {
						t.Errorf("%s is listed %s, which needs %s", p.Role, name, tl.Rule().MinRole)
					}
					// change_prepare and change_commit are open to read:
					// they act under the rule of the tool they carry.
					if p.Role == RoleRead && !tl.MCP().Annotations.ReadOnlyHint && !strings.HasPrefix(tl.ID(), "change.") {
						t.Errorf("read is listed %s, which is not read-only", name)
					}
				}
				if got["gpio_write_pin"] || got["gpio_set_pwm"] {
					t.Errorf("%s is listed a GPIO write with [gpio] writes off", p.Role)
				}
				if p.Role == RoleAdmin && len(got) != all-countGated(r, config.SwitchGPIOWrites) {
					t.Errorf("admin is listed %d tools; %d registered, %d behind [gpio] writes", len(got), all, countGated(r, config.SwitchGPIOWrites))
				}
			}
			// Every switch on: the admin sees everything.
			full := newRig(t, nil)
			if got := listedTools(t, full.sessionIn(t, admin, era, nil)); len(got) != len(full.a.tools.All()) {
				t.Errorf("admin with every switch on is listed %d of %d tools", len(got), len(full.a.tools.All()))
			}
		})
	}
}

// countRole is how many tools need role role.
func countRole(r *rig, role identity.Role) int {
	n := 0
	for _, tl := range r.a.tools.All() {
		if tl.Rule().MinRole == role {
			n++
		}
	}
	return n
}

// countGated is how many tools switch s gates.
func countGated(r *rig, s config.Switch) int {
	n := 0
	for _, tl := range r.a.tools.All() {
		if tl.Rule().Gate == s {
			n++
		}
	}
	return n
}

// A tool left out of the list is still refused by name with what it
// needs: the config key of its switch, or the role. Never "unknown tool".
func TestUnlistedToolIsRefusedWithItsReason(t *testing.T) {
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			r := newRig(t, gpioWritesOff)
			op := r.sessionIn(t, operator, era, nil)
			if listedTools(t, op)["gpio_write_pin"] {
				t.Fatal("gpio_write_pin listed with [gpio] writes off")
			}
			res, err := op.CallTool(context.Background(), &mcp.CallToolParams{Name: "gpio_write_pin", Arguments: map[string]any{"pin": 17, "value": "high"}})
			if err != nil {
				t.Fatal(err)
			}
			_, e := decodeResult[map[string]any](t, res)
			wantErr(t, e, CodePermissionDenied, map[string]any{"tool": "gpio.write_pin", "config_key": "[gpio] writes"})

			rd := r.sessionIn(t, reader, era, nil)
			if listedTools(t, rd)["service_control_service"] {
				t.Fatal("service_control_service listed to read")
			}
			res, err = rd.CallTool(context.Background(), &mcp.CallToolParams{Name: "service_control_service",
				Arguments: map[string]any{"service_name": "nginx.service", "action": "restart", "confirm": true, "reason": "x"}})
			if err != nil {
				t.Fatal(err)
			}
			_, e = decodeResult[map[string]any](t, res)
			wantErr(t, e, CodePermissionDenied, map[string]any{"tool": "service.control_service", "required_role": "operate", "role": "read"})
		})
	}
}

// Turning [gpio] writes on with manage_config_apply lists gpio_write_pin to
// the operator, whose client hears tools/list_changed first; a reload that
// changes nothing a role is listed sends nothing.
func TestConfigApplyChangesListsAndTellsClients(t *testing.T) {
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			r := newRig(t, gpioWritesOff)
			toolsChanged, resChanged, promptsChanged := make(chan struct{}, 10), make(chan struct{}, 10), make(chan struct{}, 10)
			opts := &mcp.ClientOptions{
				ToolListChangedHandler:     func(context.Context, *mcp.ToolListChangedRequest) { toolsChanged <- struct{}{} },
				ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) { resChanged <- struct{}{} },
				PromptListChangedHandler:   func(context.Context, *mcp.PromptListChangedRequest) { promptsChanged <- struct{}{} },
			}
			s := r.sessionIn(t, operator, era, opts)
			if listedTools(t, s)["gpio_write_pin"] {
				t.Fatal("gpio_write_pin listed with [gpio] writes off")
			}
			promptNames := func() map[string]bool {
				lp, err := s.ListPrompts(context.Background(), nil)
				if err != nil {
					t.Fatal(err)
				}
				got := map[string]bool{}
				for _, p := range lp.Prompts {
					got[p.Name] = true
				}
				return got
			}
			if promptNames()["safe_gpio_change"] {
				t.Fatal("safe_gpio_change listed with [gpio] writes off")
			}
			// A reload that changes no switch: no notification.
			if _, e := apply(t, r, "[metrics]\nmax_jobs = 5\n"); e != nil {
				t.Fatal(e)
			}
			if _, e := apply(t, r, gpioWritesOnTOML); e != nil {
				t.Fatal(e)
			}
			for what, ch := range map[string]chan struct{}{"tools": toolsChanged, "prompts": promptsChanged} {
				select {
				case <-ch:
				case <-time.After(hangGuard):
					t.Fatalf("no %s/list_changed after [gpio] writes went on", what)
				}
			}
			if !listedTools(t, s)["gpio_write_pin"] || !promptNames()["safe_gpio_change"] {
				t.Fatal("gpio_write_pin or safe_gpio_change not listed after [gpio] writes went on")
			}
			// The first apply changed no list: exactly one tools/list_changed
			// came (the debounce makes one of the second), and none for
			// resources, whose lists the GPIO writes do not change.
			time.Sleep(200 * time.Millisecond)
			if n := len(toolsChanged); n != 0 {
				t.Errorf("%d more tools/list_changed", n)
			}
			if n := len(resChanged); n != 0 {
				t.Errorf("%d resources/list_changed for a change that lists no other resource", n)
			}
		})
	}
}

// A LAN upstream's tools are listed by their own rule: read-only ones to
// read, writes (high) to operate, critical ones to admin.
func TestLANToolsListedByTheirRule(t *testing.T) {
	f := newFakeLAN(t)
	r, _ := lanRig(t, f)
	for _, era := range eras {
		for _, c := range []struct {
			p        Principal
			see, not []string
		}{
			{reader, []string{"hs4_devices_get_level", "hs4_slow_report"}, []string{"hs4_set_level", "hs4_scene_apply", "hs4_delete_all"}},
			{operator, []string{"hs4_devices_get_level", "hs4_set_level", "hs4_scene_apply"}, []string{"hs4_delete_all"}},
			{admin, []string{"hs4_devices_get_level", "hs4_set_level", "hs4_delete_all"}, nil},
		} {
			got := listedTools(t, r.sessionIn(t, c.p, era, nil))
			diff(t, era+" "+c.p.Role.String()+"'s tools", mayNames(r, c.p), got)
			for _, n := range c.see {
				if !got[n] {
					t.Errorf("%s %s: %s not listed", era, c.p.Role, n)
				}
			}
			for _, n := range c.not {
				if got[n] {
					t.Errorf("%s %s: %s listed", era, c.p.Role, n)
				}
			}
		}
	}
}

// Resources, templates and prompts are listed to whoever may read them:
// ours by the tool each shows or is for, an upstream's by mayReadDomain;
// the summary and the contract to everyone.
func TestResourcesAndPromptsShapedByPolicy(t *testing.T) {
	f := newFakeLAN(t)
	f.srv.AddResource(&mcp.Resource{URI: "demo://x", Name: "x", MIMEType: "text/plain"}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "upstream x"}}}, nil
	})
	f.srv.AddPrompt(&mcp.Prompt{Name: "scenes"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "upstream scenes"}}}}, nil
	})
	r := newRig(t, func(c *config.Config) {
		c.GPIO.Enabled = false // gpio off: its resource and prompt go for everyone
		c.Upstreams = []config.Upstream{{Name: "hs4", URL: "http://" + f.addr + "/mcp", Timeout: config.Duration(hangGuard / 2)}}
	})
	r.serve() // runs the upstream's client
	waitFor(t, "the upstream's prompt and resource", hangGuard, func() bool {
		d := r.a.lan.domains[0]
		d.mu.Lock()
		defer d.mu.Unlock()
		return len(d.extras.prompts) == 1 && len(d.extras.uris) == 1
	})
	nobody := Principal{Name: "eve", UID: 1005, Role: RoleNone}
	for _, era := range eras {
		for _, c := range []struct {
			p        Principal
			see, not []string
		}{
			{nobody, []string{uriSummary, uriContract}, []string{uriHealth, uriAudit, uriConfig, tmplMetric, "hs4+demo://x", "hs4_scenes", "diagnose_throttling"}},
			{reader, []string{uriSummary, uriHealth, tmplMetric, tmplService, "hs4+demo://x", "hs4_scenes", "diagnose_throttling", "triage_failed_unit"},
				[]string{uriAudit, uriPins, "safe_gpio_change"}},
			{operator, []string{uriAudit, tmplJournal, "hs4+demo://x", "hs4_scenes", "why_did_it_reboot"}, []string{uriPins, "safe_gpio_change"}},
			{admin, []string{uriAudit, uriConfig, "hs4+demo://x", "hs4_scenes", "weekly_health_report"}, []string{uriPins, "safe_gpio_change"}},
		} {
			s := r.sessionIn(t, c.p, era, nil)
			got := listedExtras(t, s)
			for _, n := range c.see {
				if !got[n] {
					t.Errorf("%s %s: %s not listed", era, c.p.Role, n)
				}
			}
			for _, n := range c.not {
				if got[n] {
					t.Errorf("%s %s: %s listed", era, c.p.Role, n)
				}
			}
			// Exactly what the read rule allows of ours.
			for uri, id := range r.a.lists.readBy {
				if want := id == "" || r.a.pipe.May(c.p, id) == nil; got[uri] != want {
					t.Errorf("%s %s: %s listed %v, its read rule says %v", era, c.p.Role, uri, got[uri], want)
				}
			}
		}
	}
}

// listedExtras is every resource URI, template and prompt name s is listed.
func listedExtras(t testing.TB, s *mcp.ClientSession) map[string]bool {
	t.Helper()
	ctx := context.Background()
	got := map[string]bool{}
	for x, err := range s.Resources(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		got[x.URI] = true
	}
	for x, err := range s.ResourceTemplates(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		got[x.URITemplate] = true
	}
	for x, err := range s.Prompts(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		got[x.Name] = true
	}
	return got
}

// Each prompt is for a registered tool its text names.
func TestEveryPromptIsForAToolItNames(t *testing.T) {
	r := newRig(t, nil)
	args := map[string]string{"unit": "nginx.service", "pin": "17"}
	for _, d := range r.a.prompts().defs() {
		tl, ok := r.a.tools.Get(d.tool)
		if !ok {
			t.Errorf("%s is for %q, which is not a tool", d.p.Name, d.tool)
			continue
		}
		text, err := d.text(args)
		if err != nil {
			t.Fatalf("%s: %v", d.p.Name, err)
		}
		if !strings.Contains(text, tl.Name()) {
			t.Errorf("%s is for %s, which its text does not name", d.p.Name, tl.Name())
		}
	}
}

// A shaped list is the caller's own: a cache may not serve it to another.
func TestShapedListsArePrivate(t *testing.T) {
	r := newRig(t, nil)
	s := r.sessionIn(t, reader, "2026-07-28", nil)
	for what, c := range listCacheables(t, s) {
		if c.CacheScope != "private" {
			t.Errorf("%s/list cacheScope %q, want private", what, c.CacheScope)
		}
	}
}

// listCacheables lists the four kinds in s and returns each result's
// cache hints by kind.
func listCacheables(t *testing.T, s *mcp.ClientSession) map[string]mcp.Cacheable {
	t.Helper()
	ctx := context.Background()
	lt, err := s.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	lr, err := s.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	lrt, err := s.ListResourceTemplates(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	lp, err := s.ListPrompts(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]mcp.Cacheable{"tools": lt.Cacheable, "resources": lr.Cacheable, "templates": lrt.Cacheable, "prompts": lp.Cacheable}
}

// A reload from the file (SIGHUP) that turns a switch off takes the tools
// it gates out of the lists and tells the clients, in both eras.
func TestReloadTurningASwitchOffTellsClients(t *testing.T) {
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			r := newRig(t, nil)
			changed := make(chan struct{}, 10)
			s := r.sessionIn(t, operator, era, &mcp.ClientOptions{
				ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
			})
			if !listedTools(t, s)["process_send_signal"] {
				t.Fatal("process_send_signal not listed with [process] signals on")
			}
			dropIn := filepath.Join(r.dir, "config.d", "60-local.toml")
			if err := os.MkdirAll(filepath.Dir(dropIn), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dropIn, []byte("[process]\nsignals = false\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := r.a.Reload(); err != nil {
				t.Fatal(err)
			}
			select {
			case <-changed:
			case <-time.After(hangGuard):
				t.Fatal("no tools/list_changed after [process] signals went off")
			}
			if listedTools(t, s)["process_send_signal"] {
				t.Fatal("process_send_signal still listed with [process] signals off")
			}
		})
	}
}
