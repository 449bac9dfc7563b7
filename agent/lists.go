package agent

import (
	"context"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/agent/tool"
	"github.com/raspi-mcp/raspi-mcp/internal/identity"
)

// Lists shaped by policy (issue 31). tools/list, resources/list,
// resources/templates/list and prompts/list answer each caller with what it
// may use now, under the configuration in force: a tool when the pipeline's
// May passes (its role, its profile, its namespace switch, its write switch:
// the checks of its dry run), a LAN tool likewise under its own rule, a raspi://
// resource or template when the caller may call the tool it shows, an
// upstream's resource, template or prompt when mayReadDomain passes, one of
// our prompts when the caller may call the tool it is for. The decision is
// the one a call meets; nothing here decides anything of its own. A call to
// a tool left out is still refused by Decide with the role, the profile or
// the config key it needs, as before.
//
// The SDK pages a list (1,000 items a page) and its cursor names the last
// item of the page it built, so dropping items from a page leaves every
// cursor right: a page may only come out shorter. A shaped list is the
// caller's own, so it is marked cacheScope "private", fresh for ttlLists
// (resources.go says why).
//
// A reload that changes what some role is listed (a switch turned on or
// off) tells every session: notifications/tools/list_changed and the
// resources and prompts ones, each only when its kind changed; a
// 2026-07-28 session hears them on its subscriptions/listen stream, as it
// hears every list_changed. A session's principal is fixed when it opens,
// so a change of [roles] alone changes no live session's lists. Its
// profile's name is fixed too, but its definition ([profiles]) is read at
// every decision, list or call: a reload that changes a profile changes
// the lists of the sessions that hold it, and the snapshot compares every
// role under every profile, so they are told.

// lists is what the list filter asks of the agent.
type lists struct {
	tools   *tool.Registry
	may     func(identity.Principal, string) *tool.Error              // the pipeline's May
	mayRead func(p identity.Principal, domain, id string) *tool.Error // mayReadDomain
	lan     *lanServers
	// profiles names every profile a principal may hold under the
	// configuration in force (config.ProfileNames).
	profiles func() []string
	// readBy maps each raspi:// resource URI and template to the tool
	// that shows it ("" for those every caller may read); promptFor maps
	// each of our prompts to the tool it is for.
	readBy, promptFor map[string]string
	// again* add one item again unchanged, which makes go-sdk send that
	// kind's list_changed to every session (go-sdk has no exported way to
	// send one otherwise; add replaces in place, so no call meets the item
	// missing). go-sdk's 10 ms debounce makes close changes one message.
	againTools, againResources, againPrompts func()
}

// newLists wires the list filter; New calls it once everything is registered.
func (a *Agent) newLists(readBy, promptFor map[string]string, againResources, againPrompts func()) *lists {
	return &lists{tools: a.tools, may: a.pipe.May, mayRead: a.mayReadDomain, lan: a.lan,
		profiles: func() []string { return a.conf().ProfileNames() },
		readBy:   readBy, promptFor: promptFor, againResources: againResources, againPrompts: againPrompts,
		againTools: func() {
			if t, ok := a.tools.Get(capabilitiesTool); ok {
				a.server.AddTool(t.MCP(), a.handler(t))
			}
		}}
}

// capabilitiesTool is the tool added again to announce a changed tools
// list: it is always registered.
const capabilitiesTool = "system.get_capabilities"

// shapeLists is the receiving middleware that filters the four list
// results by the principal in ctx. It sits inside the principal middleware
// (transport.PrincipalMiddleware), which puts an HTTP request's principal
// in ctx.
func (a *Agent) shapeLists(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if err != nil || a.lists == nil {
			return res, err
		}
		switch r := res.(type) {
		case *mcp.ListToolsResult:
			p := principalOrUnknown(ctx)
			r.Tools = slices.DeleteFunc(r.Tools, func(t *mcp.Tool) bool { return !a.lists.tool(p, t.Name) })
			r.Cacheable = mcp.Cacheable{TTLMs: ttlLists, CacheScope: cachePriv}
		case *mcp.ListResourcesResult:
			p := principalOrUnknown(ctx)
			r.Resources = slices.DeleteFunc(r.Resources, func(x *mcp.Resource) bool { return !a.lists.resource(p, x.URI) })
			r.Cacheable = mcp.Cacheable{TTLMs: ttlLists, CacheScope: cachePriv}
		case *mcp.ListResourceTemplatesResult:
			p := principalOrUnknown(ctx)
			r.ResourceTemplates = slices.DeleteFunc(r.ResourceTemplates, func(x *mcp.ResourceTemplate) bool { return !a.lists.resource(p, x.URITemplate) })
			r.Cacheable = mcp.Cacheable{TTLMs: ttlLists, CacheScope: cachePriv}
		case *mcp.ListPromptsResult:
			p := principalOrUnknown(ctx)
			r.Prompts = slices.DeleteFunc(r.Prompts, func(x *mcp.Prompt) bool { return !a.lists.prompt(p, x.Name) })
			r.Cacheable = mcp.Cacheable{TTLMs: ttlLists, CacheScope: cachePriv}
		}
		return res, err
	}
}

// tool reports whether the tool of wire name name is listed to p: the
// pipeline's May, for our tools and the LAN's alike. A name the registry
// does not know (none is served) is left as the server lists it.
//
// change_prepare and change_commit exist for critical calls only: they are
// listed to p only when p may call some critical tool, so a reader, or an
// operator on a Pi with every critical switch off, is not shown two tools
// that could only ever be refused (137 o200k tokens of a read listing).
// The pipeline still decides a call of them as before.
func (l *lists) tool(p identity.Principal, name string) bool {
	t, ok := l.tools.Lookup(name)
	if !ok {
		return true
	}
	if l.may(p, t.ID()) != nil {
		return false
	}
	if id := t.ID(); id == tool.PrepareID || id == tool.CommitID {
		return slices.ContainsFunc(l.tools.All(), func(c *tool.Tool) bool {
			return c.Rule().Risk == tool.RiskCritical && l.may(p, c.ID()) == nil
		})
	}
	return true
}

// resource reports whether the resource or template uri is listed to p.
func (l *lists) resource(p identity.Principal, uri string) bool {
	if id, ok := l.readBy[uri]; ok {
		return id == "" || l.may(p, id) == nil
	}
	if d := l.lan.domainWhere(func(d *lanDomain) bool { return strings.HasPrefix(uri, d.cfg.Name+"+") }); d != nil {
		return l.mayRead(p, d.cfg.Name, d.cfg.Name+".resources/read") == nil
	}
	return true
}

// prompt reports whether the prompt name is listed to p.
func (l *lists) prompt(p identity.Principal, name string) bool {
	if id, ok := l.promptFor[name]; ok {
		return l.may(p, id) == nil
	}
	if d := l.lan.domainWhere(func(d *lanDomain) bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		return slices.Contains(d.extras.prompts, name)
	}); d != nil {
		return l.mayRead(p, d.cfg.Name, d.cfg.Name+".prompts/get") == nil
	}
	return true
}

// domainWhere is the mounted upstream for which is holds, or nil.
func (l *lanServers) domainWhere(is func(*lanDomain) bool) *lanDomain {
	if l == nil {
		return nil
	}
	for _, d := range l.domains {
		if is(d) {
			return d
		}
	}
	return nil
}

// listed is what each role under each profile is listed under the
// configuration in force, one string a kind, to compare across a reload.
// The upstreams' resources and prompts are in it by upstream: they follow
// the role, which a reload does not change, and the profile, which it may.
type listed struct{ tools, resources, prompts string }

// snapshot is what each role under each profile is listed now. The roles
// a list can differ by are read, operate and admin: no role is listed none
// of our tools. A profile added or taken out changes the snapshot by its
// name alone, which may send a list_changed no list needed: harmless.
func (l *lists) snapshot() listed {
	var t, r, pr strings.Builder
	all := l.tools.All()
	uris := sortedKeys(l.readBy)
	prompts := sortedKeys(l.promptFor)
	var profiles []string
	if l.profiles != nil {
		profiles = l.profiles()
	}
	for _, role := range [...]identity.Role{identity.RoleRead, identity.RoleOperate, identity.RoleAdmin} {
		for _, prof := range profiles {
			l.snapshotOf(identity.Principal{Name: "lists", Role: role, Profile: prof}, all, uris, prompts, &t, &r, &pr)
		}
	}
	return listed{t.String(), r.String(), pr.String()}
}

// snapshotOf writes what p is listed to t, r and pr.
func (l *lists) snapshotOf(p identity.Principal, all []*tool.Tool, uris, prompts []string, t, r, pr *strings.Builder) {
	mark := "|" + p.Role.String() + "/" + p.Profile + ":"
	t.WriteString(mark)
	for _, x := range all {
		if l.may(p, x.ID()) == nil {
			t.WriteString(x.ID())
			t.WriteByte(' ')
		}
	}
	r.WriteString(mark)
	for _, u := range uris {
		if l.resource(p, u) {
			r.WriteString(u)
			r.WriteByte(' ')
		}
	}
	pr.WriteString(mark)
	for _, n := range prompts {
		if l.prompt(p, n) {
			pr.WriteString(n)
			pr.WriteByte(' ')
		}
	}
	if l.lan != nil {
		for _, d := range l.lan.domains {
			if l.mayRead(p, d.cfg.Name, d.cfg.Name+".resources/read") == nil {
				r.WriteString(d.cfg.Name + "+ ")
				pr.WriteString(d.cfg.Name + "+ ")
			}
		}
	}
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// announce tells every session of each kind of list whose shape changed
// since before (a snapshot under the previous configuration).
func (l *lists) announce(before listed) {
	after := l.snapshot()
	if after.tools != before.tools {
		l.againTools()
	}
	if after.resources != before.resources {
		l.againResources()
	}
	if after.prompts != before.prompts {
		l.againPrompts()
	}
}
