// Package agent is the unprivileged MCP server of raspi-mcp: tools, policy,
// audit and the socket that `raspi-mcp stdio` bridges to. Anything that needs
// root goes through the helper client; /proc and /sys are read here.
//
// The tools' wire types (the In and Out of each tool.Spec) are named
// <area><Operation>In and <area><Operation>Out: area is the tool's namespace
// (gpio, i2c, camera, process, ...), or for manage.* tools what is managed
// (config, updates, server, jobs); Operation is the tool's verb, or what a
// get_ or list_ tool reads, with its object where the area needs it
// (gpioWriteIn, i2cWriteIn, configApplyIn, updatesApplyIn, systemRebootIn).
// A tool without parameters takes noArgs; tools with the same input or output
// share one type (configCandidateIn, SystemPowerOut); a result that is a thing
// in its own right keeps that thing's name (processDetail, capabilities,
// HealthSnapshot). The names are unexported, except those the binary reads
// (cmd/raspi-mcp: AuditLogsOut, GPIOWriteOut, SensorsReadOut, ...); the tool
// listings do not depend on them (agent/testdata/schemas). Parts of results
// and helpers nothing outside the package uses are unexported too.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/agent/applog"
	"github.com/raspi-mcp/raspi-mcp/agent/approval"
	"github.com/raspi-mcp/raspi-mcp/agent/store"
	"github.com/raspi-mcp/raspi-mcp/agent/tool"
	"github.com/raspi-mcp/raspi-mcp/agent/transport"
	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/hw/apt"
	"github.com/raspi-mcp/raspi-mcp/hw/journal"
	"github.com/raspi-mcp/raspi-mcp/hw/netinfo"
	"github.com/raspi-mcp/raspi-mcp/hw/procs"
	"github.com/raspi-mcp/raspi-mcp/hw/sysinfo"
	"github.com/raspi-mcp/raspi-mcp/hw/units"
	"github.com/raspi-mcp/raspi-mcp/internal/chart"
	"github.com/raspi-mcp/raspi-mcp/internal/scrape"
	"github.com/raspi-mcp/raspi-mcp/internal/unixsock"
	"github.com/raspi-mcp/raspi-mcp/privhelper/client"
	"github.com/raspi-mcp/raspi-mcp/privhelper/witness"
)

// Options are the agent's dependencies; the binary wires them.
type Options struct {
	Config *config.Config
	// ConfigPath is the file Config was loaded from: a reload (SIGHUP,
	// manage_config_apply) reads it and its drop-ins again. "" means the
	// config cannot be reloaded or changed over MCP.
	ConfigPath string
	Store      *store.DB
	Sys        sysinfo.Source
	Helper     *client.Client
	// Witness is a second connection to the helper for the audit witness,
	// so witnessing a record never queues behind a slow privileged call;
	// nil shares Helper.
	Witness *client.Client
	Version string
	Build   string // commit or "dev"
	Mode    string // "device" or "sim"
	Logger  *slog.Logger

	Units   units.Units    // systemd, read over D-Bus (changes go through the helper)
	Apt     apt.Source     // the package manager's read side (changes go through the helper); nil: the update tools answer unavailable
	Journal journal.Reader // journalctl, or the simulated units' journal
	Root    fs.FS          // the file system root /proc, /sys and /etc are read from
	Net     network        // interfaces, routes, sockets
	// SimProcs is laptop mode's simulated process table: processes are
	// then read from its rendered /proc (not Root), and raspi-mcp itself
	// is recognised in it rather than by this machine's pids.
	SimProcs *procs.Sim
	AppLog   *applog.Ring // the agent's (and in laptop mode the helper's) latest log records; may be nil
	// MetricsRenderer writes /metrics pages: a serving agent's is
	// scrape.Process (the raspi-mcp-exporter child, so the agent does not
	// link Prometheus's library), the tests' internal/promexp in process.
	// nil answers every scrape with 503.
	MetricsRenderer scrape.Renderer
	// ChartRenderer draws metrics_get_chart's PNGs: a serving agent's is
	// chart.Process (the raspi-mcp-chart child, so the agent does not link
	// the plotting library), the tests' internal/chartpng in process. nil
	// answers every chart with unavailable.
	ChartRenderer chart.Renderer

	// CheckOutput validates every result against its tool's output schema
	// before it is sent, and turns a mismatch into an internal error. The
	// tests and `raspi-mcp selftest` set it; a serving agent does not: a
	// re-parse and a schema walk per call were half the CPU of a process
	// list, to catch a bug the tests already catch.
	CheckOutput bool

	// SelfCheckFault makes the start-up check a new version reports after
	// manage_update_server fail with this text. Only test builds set it
	// (cmd/raspi-mcp's selfCheckFault, by -ldflags), to publish an honestly
	// broken release; no config reaches it.
	SelfCheckFault string
}

// Agent serves MCP on a Unix socket.
type Agent struct {
	// doors serve server on the socket and over HTTP (agent/transport),
	// under the bounds on what sessions may hold of the agent.
	doors *transport.Doors
	// cfg is the configuration in force, swapped whole by a reload
	// (reload.go); code reads it through conf.
	cfg      atomic.Pointer[loadedConfig]
	cfgPath  string     // the file reloads read; "" = no reloads
	reloadMu sync.Mutex // one reload or config change at a time
	// healthHook, set by tests only, adds a check to an apply's health
	// check, so a failing one can be staged.
	healthHook func(context.Context, *config.Config) error
	store      *store.DB
	sys        sysinfo.Source
	helper     *client.Client
	version    string
	build      string
	mode       string
	log        *slog.Logger
	started    time.Time
	server     *mcp.Server
	tools      *tool.Registry
	lan        *lanServers // mounted LAN MCP servers ([[upstream]])
	sampler    *sampler
	io         ioMeter // the health snapshot's network and disk rates
	reverter   *reverter
	powerJobs  *powerWatch
	selfUpdate *selfUpdateWatch
	units      units.Units
	apt        apt.Source // nil: the update tools answer unavailable
	journal    journal.Reader
	root       fs.FS
	simProcs   *procs.Sim
	net        network
	appLog     *applog.Ring
	cpu        *cpuSampler // process readings shared by the process tools
	witness    *witnesser
	pipe       *tool.Pipeline   // the call pipeline of a.tools (registry.go)
	approvals  *approval.Broker // calls waiting for the device's approval (approvals.go)
	watch      *watch           // helper and upstream state, for notifications (notify.go)
	lists      *lists           // what tools/list and the other lists show each caller (lists.go)

	checkOutput bool // validate results against their output schemas (Options.CheckOutput)

	updates *watcher    // resource subscriptions' updates (subscriptions.go)
	exp     exporter    // counters and handler of /metrics (exporter.go)
	charts  *chartTools // metrics_get_chart's renderer, one chart at a time (chart.go)
}

// New registers every tool and fails if any name, schema or collision is wrong.
func New(o Options) (*Agent, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	a := &Agent{store: o.Store, sys: o.Sys, helper: o.Helper, version: o.Version, build: o.Build,
		mode: o.Mode, log: o.Logger, started: time.Now(),
		units: o.Units, apt: o.Apt, journal: o.Journal, root: o.Root, net: o.Net, appLog: o.AppLog, simProcs: o.SimProcs}
	a.checkOutput = o.CheckOutput
	a.cfg.Store(&loadedConfig{cfg: o.Config, gen: 1, at: time.Now()})
	a.cfgPath = o.ConfigPath
	if a.simProcs != nil {
		a.root = a.simProcs.FS()
	}
	if a.root == nil {
		a.root = os.DirFS("/")
	}
	if a.net == nil {
		a.net = netinfo.Linux{Root: "/"}
	}
	if a.journal == nil {
		a.journal = journal.Journalctl{}
	}
	wc := o.Witness
	if wc == nil {
		wc = o.Helper
	}
	a.witness = newWitnesser(wc, witness.Path(o.Config.Helper.StateDir), o.Logger)
	// Before any record is written: log a tampered trail, and have new
	// records follow the witnessed head instead of sealing over a cut.
	a.witness.start(o.Store)
	a.tools = tool.NewRegistry(tool.Options{Dotted: o.Config.Agent.ExposeDottedNames, CheckOutput: o.CheckOutput, Stability: stabilityOf})
	var button approval.Button
	if o.Helper != nil {
		button = helperButton{o.Helper}
	}
	a.approvals = a.newApprovals(button)
	a.pipe = a.newPipeline()
	a.declineLeftWaits()
	a.watch = newWatch()
	a.sampler = newSampler(o.Store, o.Sys, o.Config.Metrics, o.Logger)
	a.reverter = a.newReverter()
	a.powerJobs = a.newPowerWatch()
	a.selfUpdate = a.newSelfUpdateWatch(o.SelfCheckFault)
	a.updates = newWatcher(a)
	a.registerSystem()
	a.registerMetrics()
	a.registerChart(o.ChartRenderer)
	a.registerManage()
	a.registerConfigTools()
	a.registerLogs()
	a.registerChange()
	a.registerGPIO()
	a.registerI2C()
	a.registerCamera()
	a.registerService()
	a.registerProcess()
	a.registerNetwork()
	a.registerJobs()
	a.registerUpdates()
	a.registerSelfUpdate()
	a.registerSelftest()
	if a.tools.Err() != nil {
		return nil, a.tools.Err()
	}
	if err := a.newLAN(); err != nil {
		return nil, err
	}
	a.exp.handler = a.newMetricsHandler(o.MetricsRenderer)
	impl := &mcp.Implementation{Name: "raspi-mcp", Title: serverLook().title, Version: o.Version, Icons: serverLook().icons()}
	a.server = mcp.NewServer(impl, &mcp.ServerOptions{
		Instructions: instructions,
		Logger:       slog.New(slog.DiscardHandler),
		HasTools:     true,
		// raspi:// resources and prompts (resources.go, prompts.go) sit
		// beside those the LAN upstreams bring.
		HasResources: true,
		HasPrompts:   true,

		SubscribeHandler:   a.subscribe, // subscriptions.go
		UnsubscribeHandler: a.unsubscribe,
		CompletionHandler:  a.complete, // complete.go
	})
	for _, t := range a.tools.All() {
		a.server.AddTool(t.MCP(), a.handler(t))
	}
	a.lan.server = a.server // the upstreams mount their tools, resources and prompts on it when they connect
	readBy, againResources := a.registerResources()
	promptFor, againPrompts := a.registerPrompts()
	a.lists = a.newLists(readBy, promptFor, againResources, againPrompts)
	a.doors = transport.New(transport.Options{Server: a.server, Config: a.conf, Log: a.log, Audit: a.auditDoor})
	// The lists are shaped inside the principal middleware, which gives an
	// HTTP request its principal (lists.go).
	a.server.AddReceivingMiddleware(a.shapeLists)
	a.server.AddReceivingMiddleware(a.protocolErrors, slimServerInfo(impl), transport.PrincipalMiddleware, a.doors.InFlightMiddleware)
	return a, nil
}

// instructions reach the model at the start of every session. Some clients
// (Codex) keep only the first line, so that line is the one rule a model
// must not miss on its own; the rest is short and points to the contract.
const instructions = `raspi-mcp acts on a real Raspberry Pi: before any change, call the tool with dry_run: true, show the plan to the person, and pass confirm: true or a change token only after they agree.
Start with system_get_capabilities. Errors carry code, fix_hint and suggested_next_tool_calls: follow them.
How to work with this server (the guard arguments dry_run, confirm, reason and intent; which tools need them or a change token; what never to do): resource raspi://agent/contract.`

// Serve accepts MCP connections until ctx ends. Each connection's peer
// credentials are read once and decide the principal for its whole life.
func (a *Agent) Serve(ctx context.Context, ln *net.UnixListener) error {
	if err := a.sampler.Start(ctx); err != nil {
		return fmt.Errorf("agent: sampler: %w", err)
	}
	rctx, stopReverts := context.WithCancel(ctx)
	defer stopReverts()
	go a.reverter.run(rctx)
	go a.witness.retry(rctx)
	go a.powerJobs.run(rctx)
	go a.selfUpdate.run(rctx)
	go a.watchEvents(rctx)
	go a.updates.run(rctx)
	// The LAN clients stop with the reverts, before Serve returns.
	var lanWG sync.WaitGroup
	defer func() { stopReverts(); lanWG.Wait() }()
	a.lan.run(rctx, &lanWG)
	// On the way out, everything buffered is written: a clean stop loses no sample.
	defer func() {
		if err := a.sampler.Close(); err != nil {
			a.log.Error("final sample flush", "err", err)
		}
	}()
	if err := unixsock.Serve(ctx, ln, a.log, a.doors.ServeConn); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	return nil
}

// protocolErrors adds data.error_code to protocol-level errors (unknown tool,
// bad params), so clients can classify them like tool errors. It is the
// outermost middleware, so it also turns a panic anywhere in a request's
// handling (a resource read, a prompt, the SDK itself) into that request's
// internal error: go-sdk has no recover, and the agent serves every session.
// A tool's own panic is caught earlier, by tool.Tool.Run, to be audited.
func (a *Agent) protocolErrors(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := a.recovering(ctx, next, method, req)
		if err == nil {
			return res, nil
		}
		var we *jsonrpc.Error
		if errors.As(err, &we) && we.Data == nil {
			code := CodeInvalidArgument
			switch we.Code {
			case -32601:
				code = CodeNotFound
			case -32603:
				code = CodeInternal
			}
			if method == "tools/call" && we.Code == -32602 && strings.HasPrefix(we.Message, "unknown tool") {
				code = CodeNotFound // the SDK answers an unknown tool with -32602
			}
			we.Data, _ = json.Marshal(map[string]any{"error_code": code})
		}
		return res, err
	}
}

// recovering calls next, turning a panic into a -32603 error and the stack
// into the agent log.
func (a *Agent) recovering(ctx context.Context, next mcp.MethodHandler, method string, req mcp.Request) (res mcp.Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			a.log.Error("request panicked", "method", method, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			res, err = nil, &jsonrpc.Error{Code: -32603, Message: "agent: internal error; the agent log has the details"}
		}
	}()
	return next(ctx, method, req)
}
