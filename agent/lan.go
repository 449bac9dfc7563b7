package agent

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/agent/tool"
	"github.com/raspi-mcp/raspi-mcp/agent/upstream"
	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/internal/identity"
)

// The LAN's other MCP servers ([[upstream]]) are mounted as namespaces: each
// upstream tool becomes a local tool named <name>_<tool> that goes through
// the same validation, policy, guards and audit as the Pi's own tools, and
// is then forwarded. The tool list follows the upstream (tools/list_changed
// reaches our clients); an upstream that is down only makes its own tools
// answer "unavailable".

// lanDomain is one mounted upstream.
type lanDomain struct {
	cfg    config.Upstream // with defaults filled in
	client *upstream.Client

	mu      sync.Mutex
	skipped []string  // upstream tools left out, and why
	extras  lanExtras // its resources, templates and prompts mounted here
}

// guardProps are the guard arguments a mounted write tool takes on top of the
// upstream's own parameters (unless the upstream declares them itself, in
// which case they are passed through). Described as tersely as
// tool.GuardArgs, for the same reason. Fresh maps each time: every tool's
// schema owns its own.
func guardProps() map[string]map[string]any {
	return map[string]map[string]any{
		"dry_run": {"type": "boolean"},
		"confirm": {"type": "boolean", "description": "the person agreed"},
		"reason":  {"type": "string", "maxLength": 200},
		"intent":  {"type": "string", "maxLength": 200},
	}
}

// lanServers are the mounted upstreams and what mounting them takes: the
// registry their tools join, the server that lists them and their
// resources and prompts, the pipeline's handler and audit record, and the
// policy for a read of an upstream's resources and prompts.
type lanServers struct {
	domains []*lanDomain
	conf    func() *config.Config
	log     *slog.Logger
	version string // the client version the upstreams see
	tools   *tool.Registry
	// server serves the mounted tools, resources and prompts. It is made
	// after the catalog (and so after the upstreams' names are checked);
	// New sets it before anything connects.
	server  *mcp.Server
	handler func(*tool.Tool) mcp.ToolHandler                                     // the pipeline's
	record  func(rec tool.Record, in, out any, terr *tool.Error) (string, error) // the pipeline's Record
	mayRead func(p identity.Principal, domain, id string) *tool.Error            // a read of an upstream's resource or prompt
	local   func(prompt string) bool                                             // the agent's own prompts, which an upstream's must not replace
}

// newLAN creates a client per enabled upstream. It refuses, before anything
// is served, an upstream whose name is a local namespace.
func (a *Agent) newLAN() error {
	l := &lanServers{conf: a.conf, log: a.log, version: a.version, tools: a.tools, handler: a.handler,
		record: a.pipe.Record, mayRead: a.mayReadDomain, local: a.prompts().local}
	if err := l.connect(); err != nil {
		return err
	}
	a.lan = l
	return nil
}

// connect creates the upstreams' clients.
func (l *lanServers) connect() error {
	local := map[string]bool{}
	for _, t := range l.tools.All() {
		local[strings.SplitN(t.ID(), ".", 2)[0]] = true
	}
	names := make([]string, 0, len(local))
	for n := range local {
		names = append(names, n)
	}
	if err := l.conf().CheckUpstreamNames(names); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	for _, u := range l.conf().Upstreams {
		if !u.IsEnabled() {
			continue
		}
		u = u.WithDefaults()
		d := &lanDomain{cfg: u}
		o := upstream.Options{
			Name: u.Name, URL: u.URL, Timeout: u.CallTimeout(), Logger: l.log.With("upstream", u.Name),
			ClientName: "raspi-mcp", ClientVersion: l.version,
			OnToolsChanged: func() { l.syncLAN(d); l.syncLANExtras(d) },
		}
		if u.Command != "" {
			o.Command = append([]string{u.Command}, u.Args...)
		}
		if u.Token != "" {
			o.Token = u.BearerToken
		}
		if u.URL != "" {
			o.CheckAddrs = u.CheckAddrs
		}
		// The canonical form; a malformed value (config refuses it) is
		// passed as written so that Validate refuses it too, rather
		// than it silently meaning "no pin".
		o.TLSFingerprint = cmp.Or(u.Fingerprint(), u.TLSFingerprint)
		if err := o.Validate(); err != nil {
			return fmt.Errorf("agent: upstream %q: %w", u.Name, err)
		}
		d.client = upstream.New(o)
		l.domains = append(l.domains, d)
	}
	return nil
}

// run keeps every upstream connected until ctx ends.
func (l *lanServers) run(ctx context.Context, wg *sync.WaitGroup) {
	for _, d := range l.domains {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.client.Run(ctx)
		}()
	}
}

// syncLAN replaces d's mounted tools with what the upstream lists now.
func (l *lanServers) syncLAN(d *lanDomain) {
	prefix := d.cfg.Name + "."
	gone := l.tools.Unmount(func(t *tool.Tool) bool { return strings.HasPrefix(t.ID(), prefix) })
	if len(gone) > 0 {
		names := make([]string, len(gone))
		for i, t := range gone {
			names[i] = t.Name()
		}
		l.server.RemoveTools(names...)
	}
	var skipped []string
	for _, ut := range d.client.Tools() {
		if !d.cfg.Exposes(ut.Name) {
			continue
		}
		t, err := l.lanTool(d, ut)
		if err == nil {
			err = l.tools.Mount(t)
		}
		if err == nil {
			err = safely(func() { l.server.AddTool(t.MCP(), l.handler(t)) })
			if err != nil {
				l.tools.Unmount(func(x *tool.Tool) bool { return x == t })
			}
		}
		if err != nil {
			l.log.Warn("upstream tool not mounted", "upstream", d.cfg.Name, "tool", ut.Name, "err", err)
			skipped = append(skipped, fmt.Sprintf("%s: %v", ut.Name, err))
		}
	}
	d.mu.Lock()
	d.skipped = skipped
	d.mu.Unlock()
}

// safely runs one of the Server's Add methods, which panic on a schema or
// URI they cannot serve: an upstream's oddity must cost that one item, not
// the agent.
func safely(add func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("refused by the MCP server: %v", r)
		}
	}()
	add()
	return nil
}

// lanWireName maps an upstream tool name to <prefix>_<name> within the names
// every client accepts: lower case, [a-z0-9_], at most 48 characters (a long
// name keeps a hash of the original, so two never collide by truncation).
func lanWireName(prefix, name string) string {
	var b strings.Builder
	b.WriteString(prefix + "_")
	for _, r := range strings.ToLower(name) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	s := b.String()
	if len(s) > 48 {
		sum := sha256.Sum256([]byte(name))
		s = s[:39] + "_" + hex.EncodeToString(sum[:4])
	}
	return s
}

// lanTool builds the local tool that fronts one upstream tool.
func (l *lanServers) lanTool(d *lanDomain, ut *mcp.Tool) (*tool.Tool, error) {
	readOnlyHint := ut.Annotations != nil && ut.Annotations.ReadOnlyHint
	roleName, riskName := d.cfg.RuleFor(ut.Name, readOnlyHint)
	role, _ := identity.ParseRole(roleName) // config.Validate has vetted it; a bad name would be identity.RoleNone, refused
	risk := tool.ParseRisk(riskName)
	id := d.cfg.Name + "." + ut.Name
	wire, stable := lanWireName(d.cfg.Name, ut.Name), "beta" // another server's contract: we cannot vouch for it
	mutating := risk != tool.RiskRead
	if !tool.SnakeName.MatchString(wire) {
		return nil, fmt.Errorf("wire name %q is not valid", wire)
	}

	// The upstream's schema, as it sent it, plus our guard arguments.
	schema := map[string]any{}
	if ut.InputSchema != nil {
		b, err := json.Marshal(ut.InputSchema)
		if err != nil {
			return nil, fmt.Errorf("input schema: %w", err)
		}
		if err := json.Unmarshal(b, &schema); err != nil {
			return nil, fmt.Errorf("input schema is not an object: %w", err)
		}
	}
	if typ, ok := schema["type"]; ok && typ != "object" {
		return nil, fmt.Errorf("input schema has type %v, not object", typ)
	}
	schema["type"] = "object"
	props, _ := schema["properties"].(map[string]any)
	if props == nil {
		props = map[string]any{}
	}
	own := map[string]bool{}
	guards := guardProps()
	for k := range guards {
		_, own[k] = props[k]
	}
	if mutating {
		for k, p := range guards {
			if !own[k] {
				props[k] = p
			}
		}
	}
	schema["properties"] = props

	ann := &mcp.ToolAnnotations{}
	if ut.Annotations != nil {
		c := *ut.Annotations
		ann = &c
	}
	ann.ReadOnlyHint = !mutating && readOnlyHint
	title := ut.Title
	if title == "" {
		title = ann.Title
	}
	if title == "" {
		title = ut.Name
	}
	desc := strings.TrimSpace(ut.Description)
	desc += fmt.Sprintf(" [%s, via raspi-mcp: risk %s, role %s]", d.cfg.Name, risk, role)
	listing := &mcp.Tool{Name: wire, Title: title, Description: strings.TrimSpace(desc), InputSchema: schema, Annotations: ann,
		Meta: mcp.Meta{"id": id, "risk": risk.String(), "min_role": role.String(), "stability": stable, "upstream": d.cfg.Name}}
	name, readOnly := ut.Name, !mutating
	run := func(ctx context.Context, c *tool.Call, args []byte) (any, string, error) {
		return l.lanCall(ctx, d, name, readOnly, own, c, args)
	}
	return tool.Foreign(id, wire, tool.Rule{MinRole: role, Risk: risk, Tool: id, Domain: d.cfg.Name}, stable, listing, lanCheck, run), nil
}

// lanCheck is the local validation of a mounted tool's arguments: an object,
// and well-typed guard arguments. The upstream validates its own schema.
func lanCheck(raw json.RawMessage) ([]byte, *tool.Error) {
	raw = tool.RawOrEmpty(raw)
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, tool.Errf(CodeInvalidArgument, "arguments must be a JSON object").With("actual_type", tool.JSONType(raw))
	}
	var g struct {
		DryRun  *bool   `json:"dry_run"`
		Confirm *bool   `json:"confirm"`
		Reason  *string `json:"reason"`
		Intent  *string `json:"intent"`
	}
	if err := json.Unmarshal(raw, &g); err != nil {
		return nil, tool.Errf(CodeInvalidArgument, "guard arguments: dry_run and confirm are booleans, reason and intent are strings").
			With("parameter", "dry_run, confirm, reason, intent")
	}
	if g.Reason != nil && len(*g.Reason) > 200 {
		return nil, tool.Errf(CodeInvalidArgument, "reason is longer than 200 characters").With("parameter", "reason")
	}
	if g.Intent != nil && len(*g.Intent) > 200 {
		return nil, tool.Errf(CodeInvalidArgument, "intent is longer than 200 characters").With("parameter", "intent")
	}
	return raw, nil
}

// lanPlan is what a dry run of a mounted tool answers when the upstream has
// no dry run of its own: the call that would be made.
type lanPlan struct {
	DryRun    bool           `json:"dry_run"`
	Upstream  string         `json:"upstream"`
	Tool      string         `json:"tool" jsonschema:"the upstream's own tool name"`
	Arguments map[string]any `json:"arguments" jsonschema:"what would be sent, guard arguments removed"`
	Note      string         `json:"note"`
}

// lanResult is an upstream's answer, passed to the client as it came.
type lanResult struct {
	upstream string
	res      *mcp.CallToolResult
}

// PassThrough is the answer as it came, and from where.
func (r lanResult) PassThrough() (string, *mcp.CallToolResult) { return r.upstream, r.res }

func (r lanResult) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Content           []mcp.Content `json:"content"`
		StructuredContent any           `json:"structuredContent,omitempty"`
	}{r.res.Content, r.res.StructuredContent})
}

func (l *lanServers) lanCall(ctx context.Context, d *lanDomain, name string, readOnly bool, own map[string]bool, c *tool.Call, raw []byte) (any, string, error) {
	var args map[string]any
	if err := json.Unmarshal(raw, &args); err != nil {
		return nil, "", tool.Errf(CodeInvalidArgument, "arguments must be a JSON object")
	}
	// Guard arguments are ours unless the upstream has them too.
	for k, has := range own {
		if !has {
			delete(args, k)
		}
	}
	if c.DryRun && !own["dry_run"] {
		return lanPlan{DryRun: true, Upstream: d.cfg.Name, Tool: name, Arguments: args,
			Note: "policy allows it; nothing was sent to " + d.cfg.Name}, "dry run: " + d.cfg.Name + " " + name + " not called", nil
	}
	opts := upstream.CallOptions{ReadOnly: readOnly}
	if tok := c.ProgressToken; tok != nil && c.Session != nil {
		s := c.Session
		opts.Progress = func(progress, total float64, msg string) {
			pctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_ = s.NotifyProgress(pctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: progress, Total: total, Message: msg})
		}
	}
	res, err := d.client.Call(ctx, name, args, opts)
	if err != nil {
		return nil, "", lanError(d.cfg.Name, name, err)
	}
	if res.IsError {
		return nil, "", lanToolError(d.cfg.Name, name, res)
	}
	return lanResult{upstream: d.cfg.Name, res: res}, d.cfg.Name + " " + name, nil
}

// lanError maps a failed upstream call to our error shape.
func lanError(up, name string, err error) *tool.Error {
	var ue *upstream.Error
	if !errors.As(err, &ue) {
		return tool.Errf(CodeInternal, "upstream %s: %s failed", up, name)
	}
	var te *tool.Error
	switch ue.Kind {
	case upstream.Unavailable:
		te = tool.Errf(CodeUnavailable, "%s is unavailable: %s", up, ue.Error())
		if ue.RetryAfter > 0 {
			te.With("retry_after_seconds", int(ue.RetryAfter.Seconds()+0.5))
		}
		te.Hint("the Pi's own tools still work; `raspi-mcp status` on the Pi shows the upstream's state")
	case upstream.Timeout:
		te = tool.Errf(CodeUnavailable, "%s did not answer %s in time", up, name)
		if ue.MayHaveRun {
			te.Hint("the call may have taken effect: check with a read before repeating it")
		}
	case upstream.Protocol:
		code := CodeFailedPrecondition
		switch ue.Code {
		case -32602:
			code = CodeInvalidArgument
		case -32601:
			code = CodeNotFound
		}
		te = tool.Errf(code, "%s refused %s: %s", up, name, ue.Error()).With("jsonrpc_code", ue.Code)
	default:
		te = tool.Errf(CodeUnavailable, "%s: %s was cancelled", up, name)
	}
	te.Retryable = ue.Retryable
	return te.With("upstream", up)
}

// lanToolError turns an upstream tool's isError result into our error shape,
// keeping its code when it speaks ours (HS4 and Hookaido servers do).
func lanToolError(up, name string, res *mcp.CallToolResult) *tool.Error {
	var text []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text = append(text, tc.Text)
		}
	}
	msg := tool.Truncate(strings.TrimSpace(strings.Join(text, "\n")), 500)
	code := CodeFailedPrecondition
	var shaped struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if b, err := json.Marshal(res.StructuredContent); err == nil && json.Unmarshal(b, &shaped) == nil && slices.Contains(errorCodes(), shaped.Error.Code) {
		code = shaped.Error.Code
	}
	return tool.Errf(code, "%s %s: %s", up, name, msg).With("upstream", up).With("upstream_tool", name)
}

// errorCodes is the whole vocabulary of error codes, the Code constants of errors.go.
func errorCodes() []string {
	return []string{CodeInvalidArgument, CodePermissionDenied, CodeUnauthenticated, CodeNotFound,
		CodeFailedPrecondition, CodeResourceExhausted, CodeUnavailable, CodeInternal}
}

// upstreamStatus is one mounted LAN server, for status and capabilities.
type upstreamStatus struct {
	Name         string   `json:"name"`
	State        string   `json:"state" jsonschema:"connecting, up, down or breaker_open"`
	Transport    string   `json:"transport,omitempty"`
	Endpoint     string   `json:"endpoint"`
	Server       string   `json:"server,omitempty"`
	Tools        int      `json:"tools" jsonschema:"tools the upstream lists"`
	Mounted      int      `json:"mounted" jsonschema:"tools exposed here after allow/deny"`
	Skipped      []string `json:"skipped,omitempty"`
	LastError    string   `json:"last_error,omitempty"`
	LastErrorAt  string   `json:"last_error_at,omitempty"`
	LatencyP50MS float64  `json:"latency_p50_ms"`
	Token        string   `json:"token,omitempty" jsonschema:"where the token comes from (env: or file:), never the token"`
}

// lanStatus is the mounted upstreams' status.
func (a *Agent) lanStatus() []upstreamStatus { return a.lan.status() }

func (l *lanServers) status() []upstreamStatus {
	out := []upstreamStatus{}
	for _, d := range l.domains {
		st := d.client.Status()
		prefix := d.cfg.Name + "."
		mounted := 0
		for _, t := range l.tools.All() {
			if strings.HasPrefix(t.ID(), prefix) {
				mounted++
			}
		}
		d.mu.Lock()
		skipped := slices.Clone(d.skipped)
		d.mu.Unlock()
		us := upstreamStatus{Name: d.cfg.Name, State: string(st.State), Transport: st.Transport, Endpoint: st.Endpoint,
			Server: st.Server, Tools: st.Tools, Mounted: mounted, Skipped: skipped, LastError: st.LastError,
			LatencyP50MS: float64(st.P50Latency.Microseconds()) / 1000, Token: d.cfg.TokenRef()}
		if !st.LastErrorAt.IsZero() {
			us.LastErrorAt = st.LastErrorAt.UTC().Format(time.RFC3339)
		}
		out = append(out, us)
	}
	return out
}

// Resources, resource templates and prompts of an upstream are mounted under
// its prefix too: a resource URI gets the upstream's name in front of its
// scheme ("demo://x" of everything is "everything+demo://x"), a prompt is
// named <name>_<prompt>. Reading one is a read by any mapped role; each
// read is audited like a tool call to the upstream.

// lanExtras is what syncLANExtras mounted for one upstream, to remove later.
type lanExtras struct {
	uris, templates, prompts []string
}

func lanURI(prefix, uri string) string { return prefix + "+" + uri }

func (l *lanServers) syncLANExtras(d *lanDomain) {
	d.mu.Lock()
	old := d.extras
	d.extras = lanExtras{}
	d.mu.Unlock()
	l.server.RemoveResources(old.uris...)
	l.server.RemoveResourceTemplates(old.templates...)
	l.server.RemovePrompts(old.prompts...)

	ctx, cancel := context.WithTimeout(context.Background(), d.cfg.CallTimeout())
	defer cancel()
	var ex lanExtras
	name := d.cfg.Name
	if rs, err := d.client.Resources(ctx); err == nil {
		for _, r := range rs {
			if !strings.Contains(r.URI, ":") {
				continue
			}
			m := *r
			m.URI, m.Name = lanURI(name, r.URI), name+"_"+r.Name
			if safely(func() { l.server.AddResource(&m, l.lanResourceHandler(d)) }) == nil {
				ex.uris = append(ex.uris, m.URI)
			}
		}
	}
	if ts, err := d.client.ResourceTemplates(ctx); err == nil {
		for _, rt := range ts {
			m := *rt
			m.URITemplate, m.Name = lanURI(name, rt.URITemplate), name+"_"+rt.Name
			if safely(func() { l.server.AddResourceTemplate(&m, l.lanResourceHandler(d)) }) == nil {
				ex.templates = append(ex.templates, m.URITemplate)
			}
		}
	}
	if ps, err := d.client.Prompts(ctx); err == nil {
		for _, p := range ps {
			m := *p
			orig := p.Name
			m.Name = lanWireName(name, p.Name)
			if l.local(m.Name) {
				continue // "triage" + "failed_unit" would replace our own prompt
			}
			if safely(func() { l.server.AddPrompt(&m, l.lanPromptHandler(d, orig)) }) == nil {
				ex.prompts = append(ex.prompts, m.Name)
			}
		}
	}
	d.mu.Lock()
	d.extras = ex
	d.mu.Unlock()
}

// lanRead runs one resource read or prompt get: policy as a read of the
// upstream's domain, the upstream call, then an audit record.
func (l *lanServers) lanRead(ctx context.Context, d *lanDomain, id string, in any, do func(context.Context) (any, error)) (any, error) {
	p, ok := principalFrom(ctx)
	if !ok {
		p = identity.Principal{Name: "unknown", UID: -1}
	}
	start := time.Now()
	decision := "allow"
	var out any
	var terr *tool.Error
	if derr := l.mayRead(p, d.cfg.Name, id); derr != nil {
		decision, terr = "deny", derr
	} else if res, err := do(ctx); err != nil {
		terr = lanError(d.cfg.Name, id, err)
	} else {
		out = res
	}
	rec := tool.Record{Time: start.UTC(), CorrelationID: tool.NewCorrelationID(), Principal: p.Name, Role: p.Role.String(),
		Tool: id, Decision: decision, DurationMS: ms(time.Since(start)), Remote: p.Remote}
	if _, err := l.record(rec, in, out, terr); err != nil {
		l.log.Error("audit append failed", "tool", id, "err", err)
		return nil, errors.New("the audit trail could not be written")
	}
	if terr != nil {
		// Resources and prompts have no error result: a JSON-RPC error
		// carries our message and code.
		return nil, fmt.Errorf("%s: %s", terr.Code, terr.Message)
	}
	return out, nil
}

func (l *lanServers) lanResourceHandler(d *lanDomain) mcp.ResourceHandler {
	prefix := d.cfg.Name + "+"
	return func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		uri, ok := strings.CutPrefix(req.Params.URI, prefix)
		if !ok {
			return nil, mcp.ResourceNotFoundError(req.Params.URI)
		}
		out, err := l.lanRead(ctx, d, d.cfg.Name+".resources/read", map[string]any{"uri": uri}, func(ctx context.Context) (any, error) {
			res, err := d.client.ReadResource(ctx, uri)
			if err != nil {
				return nil, err
			}
			for _, c := range res.Contents {
				c.URI = lanURI(d.cfg.Name, c.URI)
			}
			return res, nil
		})
		if err != nil {
			return nil, err
		}
		return out.(*mcp.ReadResourceResult), nil
	}
}

func (l *lanServers) lanPromptHandler(d *lanDomain, name string) mcp.PromptHandler {
	return func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		out, err := l.lanRead(ctx, d, d.cfg.Name+".prompts/get", map[string]any{"name": name, "arguments": req.Params.Arguments}, func(ctx context.Context) (any, error) {
			return d.client.GetPrompt(ctx, name, req.Params.Arguments)
		})
		if err != nil {
			return nil, err
		}
		return out.(*mcp.GetPromptResult), nil
	}
}
