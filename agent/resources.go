package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/agent/store"
	"github.com/raspi-mcp/raspi-mcp/agent/tool"
	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/hw/sysinfo"
	"github.com/raspi-mcp/raspi-mcp/hw/units"
	"github.com/raspi-mcp/raspi-mcp/internal/identity"
	"github.com/raspi-mcp/raspi-mcp/privhelper/client"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

// The agent's own resources live under raspi://, beside the LAN upstreams'
// (<name>+scheme://). Each one that shows what a tool shows is read by
// running that tool through the same pipeline as a call (schema, policy,
// handler, audit), so a resource can never show more than the tool would,
// and is refused with the same error object.

const (
	uriSummary  = "raspi://state/summary"
	uriContract = "raspi://agent/contract"
	uriHealth   = "raspi://health"
	uriPins     = "raspi://gpio/pins"
	uriConfig   = "raspi://config/effective"
	uriAudit    = "raspi://audit/recent"

	tmplMetric  = "raspi://metrics/{metric}{?window,resolution}"
	tmplService = "raspi://service/{unit}"
	tmplJournal = "raspi://journal/{unit}{?lines}"

	mimeJSON     = "application/json"
	mimeMarkdown = "text/markdown"
)

// resources are the raspi:// resources and templates: those that show what
// a tool shows read through the pipeline's Call, the configuration and the
// summary ask its May and record a refusal through its Record, and the
// summary reads each part of the device from where the tool it stands for
// would.
type resources struct {
	conf      func() *config.Config
	mode      string
	call      func(ctx context.Context, p identity.Principal, id string, args any, ss *mcp.ServerSession) (any, *tool.Error)
	may       func(identity.Principal, string) *tool.Error
	denied    readAuditor
	contract  func() string
	sys       sysinfo.Source
	units     units.Units // nil: no failed units in the summary
	queue     jobQueue
	store     *store.DB // the latest denials
	helper    *client.Client
	upstreams func() []upstreamStatus
	wire      func(string) string
}

// newResources is the resources' view of the agent; the tests read the
// summary and the configuration through it.
func (a *Agent) newResources() *resources {
	return &resources{conf: a.conf, mode: a.mode, call: a.pipe.Call, may: a.pipe.May, denied: a.readAuditor(), contract: a.contract,
		sys: a.sys, units: a.units, queue: a.jobQueue(), store: a.store, helper: a.helper, upstreams: a.lanStatus, wire: a.wire}
}

// registerResources adds the raspi:// resources and templates; the server
// then declares the resources capability. It returns, for the lists shaped
// by policy (lists.go), the tool each one shows keyed by URI or template
// ("" for those any caller may read) and a resource to announce a change
// of the resources lists with.
func (a *Agent) registerResources() (readBy map[string]string, again func()) {
	readBy, again = a.newResources().register(a.server)
	a.registerOutputSchemas(readBy)
	// Innermost, added before the agent's other middleware (agent.go).
	a.server.AddReceivingMiddleware(a.subscriptionMiddleware)
	return readBy, again
}

// register adds the resources and templates to server. readBy maps each URI
// and template to the tool whose policy decides whether a caller may read
// it ("" for the summary, which hides each part itself, and the contract);
// again adds the contract once more, unchanged, which makes the server tell
// every session that the resources lists changed.
func (rs *resources) register(server *mcp.Server) (readBy map[string]string, again func()) {
	// A resource that shows what a tool shows is read through that tool
	// (read nil: readTool(tool, args)).
	static := []struct {
		uri, name, title, mime, desc string
		tool                         string
		args                         func(*url.URL) (any, error)
		read                         func(context.Context, *mcp.ReadResourceRequest) (string, error)
		ttlMS                        int // cache hint (cacheHints)
	}{
		{uriSummary, "state_summary", "Device summary", mimeJSON,
			"Start here: the device in under 1,500 bytes (model, uptime, temperature, throttling now and since boot, CPU/memory/disk, failed units, pending jobs, recent denials, helper and upstream health, which domains are on). Subscribe to hear when any of it changes.",
			"", nil, rs.readSummary, ttlLive},
		{uriContract, "agent_contract", "How to work with this server", mimeMarkdown,
			"The rules for a model: where to start, which tools need confirm, a reason, a change token or the person's confirmation, how to read errors, what never to do.",
			"", nil, func(context.Context, *mcp.ReadResourceRequest) (string, error) { return rs.contract(), nil }, ttlContract},
		{uriHealth, "health", "Health snapshot", mimeJSON,
			"What system_get_health_snapshot returns: CPU, memory, disk, temperature, throttling, network and disk I/O rates. Subscribable.",
			"system.get_health_snapshot", nil, nil, ttlLive},
		{uriPins, "gpio_pins", "GPIO pins", mimeJSON,
			"What gpio_list_pins returns: the allowlisted pins with name, mode, value and pull.",
			"gpio.list_pins", nil, nil, ttlLive},
		{uriConfig, "config_effective", "Effective configuration", mimeJSON,
			"The merged configuration in force, as TOML inside JSON; secrets appear only as their env: or file: references. Readable by whoever may call manage_get_server_status.",
			configReadTool, nil, rs.readConfig, ttlLive},
		{uriAudit, "audit_recent", "Recent audit records", mimeJSON,
			"What logs_get_recent_audit_logs returns for the latest 20 records, newest first.",
			"logs.get_recent_audit_logs", func(*url.URL) (any, error) { return map[string]any{"limit": 20}, nil }, nil, ttlLive},
	}
	readBy = make(map[string]string, len(static)+3)
	for _, r := range static {
		read := r.read
		if read == nil {
			read = rs.readTool(r.tool, r.args)
		}
		res, h := &mcp.Resource{URI: r.uri, Name: r.name, Title: r.title, MIMEType: r.mime, Description: r.desc}, resourceHandler(r.mime, r.ttlMS, read)
		server.AddResource(res, h)
		readBy[r.uri] = r.tool
		if r.uri == uriContract {
			again = func() { server.AddResource(res, h) }
		}
	}
	templates := []struct {
		tmpl, name, title, desc string
		tool                    string
		args                    func(*url.URL) (any, error)
	}{
		{tmplMetric, "metric", "Metric series",
			"One metric's history as JSON, as metrics_query_history returns it: window is a duration back from now (default 1h, at most 7d), resolution a bucket size (10s, 1m, 5m, 1h). Subscribable.",
			"metrics.query_history", metricArgs},
		{tmplService, "service", "Service status",
			"What service_get_status returns for one unit of [service] allow.",
			"service.get_status", rs.serviceArgs},
		{tmplJournal, "journal", "Unit journal",
			"What logs_query_journal returns for one unit within [logs] journal_units: the latest lines (default 50, at most 500).",
			"logs.query_journal", journalArgs},
	}
	for _, t := range templates {
		server.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: t.tmpl, Name: t.name, Title: t.title, MIMEType: mimeJSON, Description: t.desc},
			resourceHandler(mimeJSON, ttlLive, rs.readTool(t.tool, t.args)))
		readBy[t.tmpl] = t.tool
	}
	return readBy, again
}

// Cache hints (2026-07-28: ttlMs and cacheScope on resources/read and the
// list results; a client may serve a result again until ttlMs runs out,
// and only to the same user when cacheScope is "private"). They are
// chosen, not left to go-sdk's default (ttlMs 0, cacheScope "public"):
//
//   - every raspi:// read is "private": it is read under the caller's
//     role, describes one device and is never for a shared cache;
//   - a live value (the summary, health, pins, metrics, a service, a
//     journal, the audit records, the configuration in force) has ttlMs 0,
//     stale at once: a model reads it to see the device now, often right
//     after changing it; the subscribable ones announce changes anyway;
//   - the contract, which changes only when the configuration is
//     reloaded, may be kept for ttlContract; the pipeline enforces the
//     rules whatever copy a model read;
//   - a tool's output schema (raspi://agent/schemas/{tool}) changes only
//     with the agent's version: ttlSchema, a day;
//   - the lists are private (shaped by the caller's role) and stale at
//     once too (ttlLists): they change while a client holds them, on a
//     reload and when a LAN server's tools mount (a few seconds after
//     start) or go, and only a client that listens hears list_changed.
//     go-sdk's 2026-07-28 client serves its cached list for the whole
//     ttl: with 10 s, a client that listed at start missed the LAN's
//     tools for 10 s (the agent's LAN tests took 10 s each instead of
//     0.3 s), a staleness the agent could not announce to it.
const (
	ttlLive     = 0
	ttlContract = 5 * 60 * 1000
	ttlSchema   = 24 * 60 * 60 * 1000
	ttlLists    = 0
	cachePriv   = "private"
)

// resourceHandler wraps a reader into the SDK's handler: one text content,
// private, fresh for ttlMS.
func resourceHandler(mime string, ttlMS int, read func(context.Context, *mcp.ReadResourceRequest) (string, error)) mcp.ResourceHandler {
	return func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		text, err := read(ctx, req)
		if err != nil {
			return nil, err
		}
		return &mcp.ReadResourceResult{Cacheable: mcp.Cacheable{TTLMs: ttlMS, CacheScope: cachePriv},
			Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: mime, Text: text}}}, nil
	}
}

// readTool reads a resource by calling tool id with the arguments args
// derives from the URI (nil: none).
func (rs *resources) readTool(id string, args func(*url.URL) (any, error)) func(context.Context, *mcp.ReadResourceRequest) (string, error) {
	return func(ctx context.Context, req *mcp.ReadResourceRequest) (string, error) {
		u, err := url.Parse(req.Params.URI)
		if err != nil {
			return "", resourceError(tool.Errf(CodeInvalidArgument, "resource URI %q does not parse: %v", req.Params.URI, err))
		}
		var in any = map[string]any{}
		if args != nil {
			if in, err = args(u); err != nil {
				te, _ := toToolError(err)
				return "", resourceError(te)
			}
		}
		out, terr := rs.call(ctx, principalOrUnknown(ctx), id, in, req.Session)
		if terr != nil {
			return "", resourceError(terr)
		}
		js, err := json.Marshal(out)
		if err != nil {
			return "", resourceError(tool.Errf(CodeInternal, "resource %s: %v", req.Params.URI, err))
		}
		return string(js), nil
	}
}

func principalOrUnknown(ctx context.Context) identity.Principal {
	if p, ok := principalFrom(ctx); ok {
		return p
	}
	return identity.Principal{Name: "unknown", UID: -1}
}

// resourceError is a tool.Error as a JSON-RPC error: resources and prompts
// have no error result, so the message says code and cause and data carries
// the whole error object (fix_hint, suggested_next_tool_calls) beside the
// error_code every protocol error of this server has.
func resourceError(te *tool.Error) error {
	code := int64(-32603)
	switch te.Code {
	case CodeInvalidArgument:
		code = -32602
	case CodeNotFound:
		code = -32002 // MCP's "resource not found"
	case CodePermissionDenied, CodeFailedPrecondition:
		code = -32001
	case CodeResourceExhausted:
		code = -32000 // a bound of this server: JSON-RPC's server-error range
	}
	data, _ := json.Marshal(map[string]any{"error_code": te.Code, "error": te})
	return &jsonrpc.Error{Code: code, Message: te.Code + ": " + te.Message, Data: data}
}

// metricArgs maps raspi://metrics/{metric}{?window,resolution} onto
// metrics.query_history.
func metricArgs(u *url.URL) (any, error) {
	name := strings.TrimPrefix(u.Path, "/")
	if name == "" {
		return nil, tool.Errf(CodeInvalidArgument, "raspi://metrics/ needs a metric name, e.g. raspi://metrics/cpu_percent")
	}
	window := defaultWindow
	if w := u.Query().Get("window"); w != "" {
		d, terr := parseWindow(w)
		if terr != nil {
			return nil, terr
		}
		window = d
	}
	now := time.Now().UTC()
	in := map[string]any{"metric_names": []string{name}, "start_time": now.Add(-window).Format(time.RFC3339), "end_time": now.Format(time.RFC3339)}
	if r := u.Query().Get("resolution"); r != "" {
		in["resolution"] = r
	}
	return in, nil
}

// defaultWindow is a metric resource's window when its URI names none.
const defaultWindow = time.Hour

// parseWindow reads a metric resource's window: a duration back from now.
func parseWindow(w string) (time.Duration, *tool.Error) {
	d, err := time.ParseDuration(w)
	if err != nil || d <= 0 || d > 7*24*time.Hour {
		return 0, tool.Errf(CodeInvalidArgument, "window %q: want a duration from 1s to 168h, e.g. 15m or 24h", clip(w)).With("window", clip(w))
	}
	return d, nil
}

// serviceArgs maps raspi://service/{unit} onto service.get_status, for the
// units of [service] allow only: the template is the way to watch the units
// this device lets a model manage, not a window on every unit.
func (rs *resources) serviceArgs(u *url.URL) (any, error) {
	name, err := unitName(strings.TrimPrefix(u.Path, "/"))
	if err != nil {
		return nil, err
	}
	if !allowedUnit(rs.conf(), name) {
		return nil, tool.Errf(CodePermissionDenied, "%s is not in [service] allow, so raspi://service/ does not show it", name).
			With("unit", name).With("config_key", "[service] allow").
			Hint("call service_get_status for other units, or complete raspi://service/{unit} to see the allowed ones")
	}
	return map[string]any{"service_name": name}, nil
}

// allowedUnit reports whether c's [service] allow admits unit name.
func allowedUnit(c *config.Config, name string) bool {
	return config.UnitMatches(c.Service.Allow, name)
}

// journalArgs maps raspi://journal/{unit}{?lines} onto logs.query_journal,
// which holds the [logs] journal_units check.
func journalArgs(u *url.URL) (any, error) {
	unit := strings.TrimPrefix(u.Path, "/")
	if unit == "" {
		return nil, tool.Errf(CodeInvalidArgument, "raspi://journal/ needs a unit, e.g. raspi://journal/nginx.service")
	}
	lines := 50
	if l := u.Query().Get("lines"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 500 {
			return nil, tool.Errf(CodeInvalidArgument, "lines %q: want 1..500", l).With("lines", l)
		}
		lines = n
	}
	return map[string]any{"unit": unit, "limit": lines}, nil
}

// configReadTool is the tool whose policy raspi://config/effective follows.
const configReadTool = "manage.get_server_status"

// readConfig shows the merged configuration under the policy of
// manage.get_server_status, which already summarises it. Upstream tokens
// are references ("env:NAME", "file:/path") by construction (config
// refuses inline secrets), so the TOML holds no secret.
func (rs *resources) readConfig(ctx context.Context, req *mcp.ReadResourceRequest) (string, error) {
	p := principalOrUnknown(ctx)
	if derr := rs.may(p, configReadTool); derr != nil {
		rs.denied.deny(p, "resources.config_effective", derr)
		return "", resourceError(derr)
	}
	c := *rs.conf()
	c.Upstreams = slices.Clone(c.Upstreams)
	for i := range c.Upstreams {
		c.Upstreams[i].Token = c.Upstreams[i].TokenRef()
	}
	var b strings.Builder
	if err := toml.NewEncoder(&b).Encode(c); err != nil {
		return "", resourceError(tool.Errf(CodeInternal, "config: %v", err))
	}
	js, _ := json.Marshal(map[string]any{"path": config.DefaultPath, "mode": rs.mode, "toml": b.String()})
	return string(js), nil
}

// readAuditor records a refused read that did not go through a tool's
// pipeline (a resource, a subscription), as a denied tool call is.
type readAuditor struct {
	record func(rec tool.Record, in, out any, terr *tool.Error) (string, error) // the pipeline's Record
	log    *slog.Logger
}

func (a *Agent) readAuditor() readAuditor { return readAuditor{record: a.pipe.Record, log: a.log} }

func (r readAuditor) deny(p identity.Principal, id string, terr *tool.Error) {
	rec := tool.Record{Time: time.Now().UTC(), CorrelationID: tool.NewCorrelationID(), Principal: p.Name, Role: p.Role.String(),
		Tool: id, Decision: "deny", Remote: p.Remote}
	if _, err := r.record(rec, map[string]any{}, nil, terr); err != nil {
		r.log.Error("audit append failed", "tool", id, "err", err)
	}
}

// stateSummary is raspi://state/summary: short keys, no nulls, capped lists,
// so it stays well under 1,500 bytes. Each part is shown only to whoever
// may call the tool it comes from; Hidden names the parts left out.
type stateSummary struct {
	Model     string         `json:"model,omitempty"`
	Mode      string         `json:"mode"`
	UptimeS   uint64         `json:"uptime_s,omitempty"`
	TempC     *float64       `json:"temp_c,omitempty"`
	CPUPct    *float64       `json:"cpu_pct,omitempty"`
	MemPct    *float64       `json:"mem_pct,omitempty"`
	DiskPct   *float64       `json:"disk_pct,omitempty"`
	Throttle  *summaryThrot  `json:"throttle,omitempty"`
	Failed    []string       `json:"failed_units,omitempty"`
	Jobs      []string       `json:"pending_jobs,omitempty"`
	Denials   []string       `json:"recent_denials,omitempty"`
	Helper    string         `json:"helper,omitempty"`
	Upstreams map[string]any `json:"upstreams,omitempty"`
	Domains   []string       `json:"domains_on"`
	Writes    []string       `json:"writes_on"`
	Hidden    []string       `json:"hidden,omitempty" jsonschema:"parts your role or this device's switches leave out"`
	Next      string         `json:"next"`
}

// summaryThrot is the firmware's flags by name, now and since boot, and
// where they come from. A source that tells only under-voltage now (hwmon
// rpi_volt) fills UV instead; with no source only Src ("none") is set, so
// an empty list never stands for "unknown".
type summaryThrot struct {
	Now       *[]string `json:"now,omitempty"`
	SinceBoot *[]string `json:"since_boot,omitempty"`
	UV        *bool     `json:"under_voltage_now,omitempty"`
	Src       string    `json:"src"`
}

const summaryListCap = 5

func (rs *resources) readSummary(ctx context.Context, req *mcp.ReadResourceRequest) (string, error) {
	s := rs.stateSummary(ctx, principalOrUnknown(ctx))
	js, err := json.Marshal(s)
	if err != nil {
		return "", resourceError(tool.Errf(CodeInternal, "summary: %v", err))
	}
	return string(js), nil
}

func ptr1(v float64) *float64 { r := round1(v); return &r }

func (rs *resources) stateSummary(ctx context.Context, p identity.Principal) stateSummary {
	s := stateSummary{Mode: rs.mode, Domains: []string{}, Writes: rs.conf().WritesOn()}
	allowed := func(id string) bool {
		if rs.may(p, id) != nil {
			s.Hidden = append(s.Hidden, id)
			return false
		}
		return true
	}
	for _, n := range config.Namespaces() {
		if n.Switch.Valid() && n.Switch.On(rs.conf()) {
			s.Domains = append(s.Domains, n.Name)
		}
	}
	if s.Writes == nil {
		s.Writes = []string{}
	}
	if allowed("system.get_basic_info") {
		if b, err := rs.sys.Basic(ctx); err == nil {
			s.Model = b.Model
		}
	}
	if allowed("system.get_health_snapshot") {
		if h, err := rs.sys.Health(ctx); err == nil {
			s.UptimeS, s.CPUPct = h.UptimeSeconds, ptr1(h.CPUUsagePercent)
			if h.TemperatureCelsius != nil {
				s.TempC = round1p(h.TemperatureCelsius)
			}
			if h.MemoryTotalBytes > 0 {
				s.MemPct = ptr1(float64(h.MemoryUsedBytes) * 100 / float64(h.MemoryTotalBytes))
			}
			if h.DiskTotalBytes > 0 {
				s.DiskPct = ptr1(float64(h.DiskUsedBytes) * 100 / float64(h.DiskTotalBytes))
			}
			s.Throttle = summaryThrottle(h.Throttle)
		}
	}
	if allowed("service.list_services") && rs.units != nil {
		if us, err := rs.units.List(ctx); err == nil {
			for _, u := range us {
				if u.ActiveState == "failed" {
					s.Failed = append(s.Failed, u.Name)
				}
			}
			s.Failed = capList(s.Failed)
		}
	}
	if allowed("manage.list_jobs") {
		if jobs, err := rs.queue.list(); err == nil {
			for _, j := range jobs.Jobs {
				if j.Kind != "sampling" {
					s.Jobs = append(s.Jobs, j.JobID+": "+j.Summary)
				}
			}
			s.Jobs = capList(s.Jobs)
		}
	}
	if allowed("logs.get_recent_audit_logs") {
		if recs, _, err := rs.store.QueryAudit(store.AuditQuery{OnlyErrors: true, Limit: 3}); err == nil {
			for _, r := range recs {
				if r.Decision == "deny" {
					s.Denials = append(s.Denials, fmt.Sprintf("%s %s %s", r.Time.UTC().Format(time.RFC3339), r.Tool, r.ErrorCode))
				}
			}
		}
	}
	if allowed("manage.get_server_status") {
		s.Helper = "down"
		if helperUp(ctx, rs.helper) {
			s.Helper = "up"
		}
		for _, u := range rs.upstreams() {
			if s.Upstreams == nil {
				s.Upstreams = map[string]any{}
			}
			s.Upstreams[u.Name] = u.State
		}
	}
	s.Next = "tools: " + rs.wire("system.get_capabilities") + "; rules: " + uriContract
	return s
}

// helperUp asks the helper for its status, for at most two seconds.
func helperUp(ctx context.Context, helper *client.Client) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err := client.Call(ctx, helper, proto.Status, proto.StatusReq{})
	return err == nil
}

// summaryThrottle is the summary's throttle part from a snapshot's.
func summaryThrottle(t *sysinfo.Throttle) *summaryThrot {
	switch {
	case t == nil:
		return &summaryThrot{Src: sysinfo.ThrottleNone}
	case t.UnderVoltageOnly:
		uv := t.UnderVoltage
		return &summaryThrot{UV: &uv, Src: t.Source}
	}
	now := flags(t.UnderVoltage, t.FreqCapped, t.Throttled, t.SoftTempLimit)
	since := flags(t.UnderVoltageOccurred, t.FreqCappedOccurred, t.ThrottledOccurred, t.SoftTempLimitOccurred)
	return &summaryThrot{Now: &now, SinceBoot: &since, Src: t.Source}
}

func flags(uv, capped, throttled, soft bool) []string {
	out := []string{}
	for _, f := range []struct {
		on   bool
		name string
	}{{uv, "under_voltage"}, {capped, "freq_capped"}, {throttled, "throttled"}, {soft, "soft_temp_limit"}} {
		if f.on {
			out = append(out, f.name)
		}
	}
	return out
}

// capList keeps the first entries and says how many more there are.
func capList(l []string) []string {
	if len(l) <= summaryListCap {
		return l
	}
	return append(l[:summaryListCap:summaryListCap], fmt.Sprintf("... and %d more", len(l)-summaryListCap))
}
