// Command demo is `make demo`: it starts raspi-mcp in laptop mode on the
// simulated board, walks an MCP session through `raspi-mcp stdio` with the Go
// SDK client, as a laptop's assistant would over ssh, prints it for a person,
// and stops everything.
//
// Every step says what it will show, and the demo checks that it did: each
// call's outcome (done, or refused with which code, and whether a person was
// asked and what they answered, as the audit trail records it) is compared
// with the step's promise; a step that shows something else is printed
// loudly and makes the demo exit 1, so the story cannot quietly go stale
// when the agent changes.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	binDir := flag.String("bin", "bin", "directory with raspi-mcp and raspi-mcp-simhelper")
	width := flag.Int("width", 0, "wrap the output at this many columns (default: the terminal's width, 80 when not a terminal)")
	flag.Parse()
	if *width <= 0 {
		*width = terminalWidth(os.Stdout)
	}
	d := &demo{scr: newScreen(os.Stdout, *width), binDir: *binDir}
	if err := d.run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// demo is one run: where it prints, the agent it talks to, and what its
// steps showed.
type demo struct {
	scr    *screen
	binDir string
	raspi  string // raspi-mcp's absolute path
	dir    string // the laptop-mode agent's directory

	asked   chan string // the client-side person's answers, one per question
	checked int         // steps whose outcome was checked
	lastSeq uint64      // the audit record of the last audited step
	wrong   []string    // steps that showed something else than their title
}

func (d *demo) run() error {
	raspi, err := filepath.Abs(filepath.Join(d.binDir, "raspi-mcp"))
	if err != nil {
		return err
	}
	d.raspi = raspi
	dir, err := os.MkdirTemp("", "raspi-mcp-demo-")
	if err != nil {
		return err
	}
	d.dir = dir
	defer os.RemoveAll(dir)
	logPath := filepath.Join(dir, "agent.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	d.asked = make(chan string, 4)

	d.legend()
	s := d.scr
	s.step("Start the agent and its helper on the simulated board")
	s.line(2, "its state in a new directory, DIR=%s", dir)
	s.mark(2, "$", "raspi-mcp serve --sim --dir $DIR")
	serve := exec.Command(raspi, "serve", "--sim", "--dir", dir)
	serve.Stdout, serve.Stderr = logf, logf
	if err := serve.Start(); err != nil {
		return err
	}
	defer func() {
		_ = serve.Process.Signal(syscall.SIGTERM)
		_ = serve.Wait()
	}()
	start := time.Now()
	for exec.Command(raspi, "status", "--dir", dir).Run() != nil {
		if time.Since(start) > 20*time.Second {
			log, _ := os.ReadFile(logPath)
			return fmt.Errorf("agent not ready after 20 s:\n%s", log)
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.line(2, "ready in %d ms", time.Since(start).Milliseconds())
	s.mark(2, "$", "raspi-mcp status --dir $DIR")
	// status fits its output to $COLUMNS when piped: the block's indent
	// comes off the screen's width, so nothing wraps twice.
	st := d.command("status")
	st.Env = append(os.Environ(), fmt.Sprintf("COLUMNS=%d", d.scr.width-4))
	status, _ := st.Output()
	s.block(4, d.hideDir(string(status)))

	s.step("Connect like a laptop client does: the Go SDK client runs `raspi-mcp stdio`")
	s.line(2, "(on a Pi: ssh -T pi raspi-mcp stdio)")
	ctx := context.Background()
	// The demo's client can ask its person (MCP elicitation), as Claude Code
	// and VS Code can: a scripted person reads each question, agrees to the
	// reboot and declines anything else.
	client := mcp.NewClient(&mcp.Implementation{Name: "raspi-mcp-demo", Version: "1"}, &mcp.ClientOptions{
		LoggingMessageHandler: d.relayWaiting,
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			s.mark(2, "?", "the agent asks the person, through the client:")
			s.block(6, req.Params.Message)
			if strings.Contains(req.Params.Message, "system_reboot") {
				s.mark(2, "!", "the person ticks confirm and accepts")
				d.asked <- "accept"
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true, "note": "ok, after the backup"}}, nil
			}
			s.mark(2, "!", "the person declines")
			d.asked <- "decline"
			return &mcp.ElicitResult{Action: "decline"}, nil
		},
	})
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: d.command("stdio")}, nil)
	if err != nil {
		return err
	}
	defer cs.Close()
	if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "notice"}); err != nil {
		return err
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		return err
	}
	d.toolList(tools.Tools)

	s.step("Load the device into context cheaply: the summary resource")
	s.mark(2, "→", "resources/read raspi://state/summary")
	sum, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "raspi://state/summary"})
	if err != nil {
		return err
	}
	text := sum.Contents[0].Text
	// Compact JSON with short keys: o200k counts ~3.4 bytes a token here
	// (603 bytes, 179 tokens measured), not the 4 of English prose.
	s.line(2, "%d bytes, ~%d tokens:", len(text), len(text)*10/34)
	s.json(4, text)

	s.step("A prompt names the exact tools and resources for a job")
	s.mark(2, "→", `prompts/get triage_failed_unit {"unit": "backup"}`)
	pr, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "triage_failed_unit", Arguments: map[string]string{"unit": "backup"}})
	if err != nil {
		return err
	}
	s.block(4, pr.Messages[0].Content.(*mcp.TextContent).Text)

	calls := []call{
		{"How is the board doing?", "system_get_health_snapshot", nil, done},
		{"What does this device have, and what may I do?", "system_get_capabilities", nil, done},
		{"History is recorded from the first start (default job every 10 s, kept 48 h)", "metrics_get_summary", map[string]any{"window": "5m"}, done},
		{"What is wired to the board?", "gpio_list_pins", nil, done},
		{"Switch the relay on for 2 seconds (a lease: it turns itself off)", "gpio_write_pin",
			map[string]any{"pin": 17, "value": "high", "duration_ms": 2000, "reason": "demo: water the plants"}, done},
		{"A pin the owner did not allow is refused", "gpio_write_pin", map[string]any{"pin": 5, "value": "high"}, refused("permission_denied")},
		{"The greenhouse sensor, in units (BME280 on I2C bus 1)", "sensors_read", map[string]any{"name": "greenhouse"}, done},
		{"What is using the CPU? (the simulated board's processes: laptop mode never lists or signals the laptop's)",
			"process_list_processes", map[string]any{"limit": 5}, done},
		{"Stopping ffmpeg is high risk: the person is asked at the client, and declines", "process_send_signal",
			map[string]any{"pid": 1342, "signal": "TERM", "confirm": true, "reason": "demo: free the CPU"},
			outcome{Code: "permission_denied", Person: declinedAtClient}},
		{"root's processes are protected: TERM to the board's sshd is refused, nobody is asked", "process_send_signal",
			map[string]any{"pid": 496, "signal": "TERM", "confirm": true, "reason": "demo"}, refused("permission_denied")},
		{"A reboot without confirm and reason is refused (high risk)", "system_reboot", map[string]any{"delay_seconds": 60}, refused("failed_precondition")},
		{"A dry run shows the plan and changes nothing", "system_reboot", map[string]any{"dry_run": true, "delay_seconds": 60}, done},
		{"Confirmed, with a reason, and the person accepts at the client: the helper schedules it (recorded, not performed, on the sim board)",
			"system_reboot", map[string]any{"confirm": true, "reason": "demo: apply kernel update", "delay_seconds": 60},
			outcome{Person: acceptedAtClient}},
		{"Bad input gets a structured invalid_argument", "system_reboot", map[string]any{"delay_seconds": "soon"}, refused("invalid_argument")},
	}
	for _, c := range calls {
		if _, err := d.call(ctx, cs, c, nil); err != nil {
			return err
		}
	}
	// The lease's end is recorded by the agent when it comes: waited for
	// here, so that the story (and the audit trail below) has it in one
	// place, whatever the machine's speed.
	if err := d.waitForRecord(ctx, cs, "gpio.write_pin", "lease ended: revert"); err != nil {
		return err
	}
	if _, err := d.call(ctx, cs, call{"The relay's 2 seconds are over: the agent switched it back, and recorded that", "gpio_read_pin",
		map[string]any{"pin": 17}, done}, nil); err != nil {
		return err
	}
	if err := d.shutdownAtTheConsole(ctx, cs); err != nil {
		return err
	}
	if err := d.osUpdates(ctx); err != nil {
		return err
	}
	for _, c := range []call{
		{"The audit trail of this session", "logs_get_recent_audit_logs", map[string]any{"limit": 20, "oldest_first": true}, done},
		{"Is the hash chain intact?", "logs_verify_audit_chain", nil, done},
	} {
		if _, err := d.call(ctx, cs, c, nil); err != nil {
			return err
		}
	}

	s.step("On the device, a person checks the audit trail")
	out, _ := d.command("audit", "verify").CombinedOutput()
	s.mark(2, "$", "raspi-mcp audit verify --dir $DIR")
	s.block(4, d.hideDir(string(out)))
	power, _ := os.ReadFile(filepath.Join(dir, "power.log"))
	s.line(2, "the simulated board's power log (the reboot was scheduled, never the shutdown):")
	for _, l := range strings.Split(strings.TrimSpace(string(power)), "\n") {
		s.json(4, l)
	}
	s.step("Stop the agent (SIGTERM) and remove $DIR")
	return d.verdict()
}

// call is one tool call of the story: what its title promises, and the
// outcome that keeps the promise.
type call struct {
	title string
	tool  string
	args  map[string]any
	want  outcome
}

// command is raspi-mcp with args, for the demo's agent.
func (d *demo) command(args ...string) *exec.Cmd {
	return exec.Command(d.raspi, append(args, "--dir", d.dir)...)
}

// hideDir writes the demo's directory as $DIR: it is long, different every
// run, and gone when the demo ends.
func (d *demo) hideDir(s string) string { return strings.ReplaceAll(s, d.dir, "$DIR") }

// call makes one call of the story, prints it and checks its outcome.
// progress, when set, asks for progress notifications under that token.
func (d *demo) call(ctx context.Context, cs *mcp.ClientSession, c call, progress any) (map[string]any, error) {
	d.scr.step(c.title)
	args := c.args
	if args == nil {
		args = map[string]any{}
	}
	argJSON, _ := json.Marshal(args)
	d.scr.mark(2, "→", fmt.Sprintf("%s %s", c.tool, argJSON))
	p := &mcp.CallToolParams{Name: c.tool, Arguments: args}
	if progress != nil {
		p.SetProgressToken(progress)
	}
	res, err := cs.CallTool(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("demo: %s: %w", c.tool, err)
	}
	m := d.show(c.tool, res)
	got, err := d.outcomeOf(ctx, cs, res, m)
	if err != nil {
		return nil, err
	}
	d.check(c.title, c.want, got)
	return m, nil
}

func (d *demo) legend() {
	s := d.scr
	s.line(0, "raspi-mcp demo: an assistant's MCP session with a simulated Raspberry Pi.")
	s.line(0, "How to read it:")
	for _, l := range [][2]string{
		{"==", "a step of the story; its title says what it shows, and the demo checks it"},
		{"$", "a command a person types"},
		{"→", "what the assistant's client sends to the agent"},
		{"✓", "the call was done; the agent's one-line answer follows"},
		{"✗", "the call was refused or failed: the error's code and message"},
		{"?  !", "the agent asks the person through the client; what they answer"},
		{"…", "what the client is told while a call waits"},
		{"[audit #6]", "the call's record in the audit trail (changes, refusals)"},
		{"[no audit]", "a read that changed nothing: not recorded"},
		{"MISMATCH", "a step showed something else than its title: the demo fails"},
	} {
		s.put(fmt.Sprintf("  %-11s", l[0]), strings.Repeat(" ", 13), l[1])
	}
}

// toolList prints the tools by namespace, the prefix of their names.
func (d *demo) toolList(tools []*mcp.Tool) {
	byNS := map[string][]string{}
	var order []string
	for _, t := range tools {
		ns, rest, ok := strings.Cut(t.Name, "_")
		if !ok {
			ns, rest = t.Name, t.Name
		}
		if _, seen := byNS[ns]; !seen {
			order = append(order, ns)
		}
		byNS[ns] = append(byNS[ns], rest)
	}
	slices.Sort(order)
	d.scr.line(2, "%d tools, by namespace (the name is namespace_rest):", len(tools))
	wide := 0
	for _, ns := range order {
		wide = max(wide, len(ns))
	}
	for _, ns := range order {
		d.scr.mu.Lock()
		d.scr.put(fmt.Sprintf("    %-*s ", wide, ns), strings.Repeat(" ", wide+5), strings.Join(byNS[ns], ", "))
		d.scr.mu.Unlock()
	}
}

// osUpdates walks the OS update tools on the simulated package manager:
// check, preview (which refreshes the lists), the critical apply through
// change_prepare and change_commit, and the check again.
//
// It uses a second client, one that cannot ask its person (a script, or
// an assistant without elicitation): for it a critical call goes through
// the change token, which the person approves by letting the commit run.
func (d *demo) osUpdates(ctx context.Context) error {
	s := d.scr
	client := mcp.NewClient(&mcp.Implementation{Name: "raspi-mcp-demo-updates", Version: "1"}, &mcp.ClientOptions{
		LoggingMessageHandler: d.relayWaiting,
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			s.mark(4, "…", fmt.Sprintf("%3.0f%% %s", req.Params.Progress, req.Params.Message))
		},
	})
	s.step("OS updates, from a second client that cannot ask its person: critical calls take a change token")
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: d.command("stdio")}, nil)
	if err != nil {
		return err
	}
	defer cs.Close()
	if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "notice"}); err != nil {
		return err
	}
	if _, err := d.call(ctx, cs, call{"Is anything waiting? raspi-mcp and the OS", "manage_check_for_updates", nil, done}, nil); err != nil {
		return err
	}
	pre, err := d.call(ctx, cs, call{"Preview the OS updates: the lists are refreshed, nothing is installed", "manage_preview_os_updates", nil, done}, nil)
	if err != nil {
		return err
	}
	prep, err := d.call(ctx, cs, call{"Applying is critical: change_prepare binds a token to exactly this plan_hash", "change_prepare",
		map[string]any{"tool": "manage_apply_os_updates", "arguments": map[string]any{"plan_hash": pre["plan_hash"], "reason": "demo: monthly updates"}}, done}, nil)
	if err != nil {
		return err
	}
	// A change token is something a model can get by itself: critical
	// calls wait for the owner at the Pi, who presses the board's button.
	pressed := make(chan []byte, 1)
	go func() {
		out, _ := d.command("sim", "press", "--wait", "30s").CombinedOutput()
		pressed <- out
	}()
	if _, err := d.call(ctx, cs, call{"change_commit waits for the owner at the Pi, who presses the button: then it installs exactly the previewed versions, with progress",
		"change_commit", map[string]any{"token": prep["token"]}, outcome{Person: approvedWithButton}}, "demo-os-update"); err != nil {
		return err
	}
	s.mark(2, "$", "raspi-mcp sim press   (meanwhile, at the Pi)")
	s.block(4, d.hideDir(string(<-pressed)))
	_, err = d.call(ctx, cs, call{"Checked again: nothing left but the held package, and a reboot is required", "manage_check_for_updates", nil, done}, nil)
	return err
}

// waitForRecord waits (up to 30 s) until the audit trail has a record of
// tool with reason.
func (d *demo) waitForRecord(ctx context.Context, cs *mcp.ClientSession, tool, reason string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "logs_get_recent_audit_logs", Arguments: map[string]any{"tool": tool, "limit": 20}})
		if err != nil {
			return fmt.Errorf("demo: waiting for the audit record %q of %s: %w", reason, tool, err)
		}
		var page struct {
			Entries []struct {
				Reason string `json:"reason"`
			} `json:"entries"`
		}
		if err := remarshal(res.StructuredContent, &page); err != nil {
			return fmt.Errorf("demo: waiting for the audit record %q of %s: %w", reason, tool, err)
		}
		for _, e := range page.Entries {
			if e.Reason == reason {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("demo: no audit record %q of %s after 30 s", reason, tool)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// relayWaiting prints what the agent tells the client while a call waits
// for the device: the message an assistant relays to its person.
func (d *demo) relayWaiting(_ context.Context, req *mcp.LoggingMessageRequest) {
	if m, ok := req.Params.Data.(map[string]any); ok && m["event"] == "approval_waiting" {
		d.scr.mark(2, "…", fmt.Sprintf("the client is told: %v", m["message"]))
	}
}

// shutdownAtTheConsole calls a critical tool from the assistant and has
// the person at the Pi answer it with `raspi-mcp approve`: the console
// shows who asks, the tool and its plan, and the person says no.
func (d *demo) shutdownAtTheConsole(ctx context.Context, cs *mcp.ClientSession) error {
	console := make(chan []byte, 1)
	go func() {
		cmd := d.command("approve", "--wait", "30s")
		cmd.Stdin = strings.NewReader("n\n")
		out, _ := cmd.CombinedOutput()
		console <- out
	}()
	// force replaces the reboot scheduled above, if the person agrees.
	if _, err := d.call(ctx, cs, call{"Shutdown is critical: it waits for the owner at the Pi, who reads it at the console and says no",
		"system_shutdown", map[string]any{"reason": "demo: moving the Pi", "force": true},
		outcome{Code: "permission_denied", Person: declinedAtConsole}}, nil); err != nil {
		return err
	}
	d.scr.mark(2, "$", "raspi-mcp approve   (meanwhile, at the Pi; the person types n)")
	d.scr.block(4, d.hideDir(string(<-console)))
	return nil
}

// show prints the one-line summary, and for a few tools the interesting
// part; it returns the structured result (or the error's body).
func (d *demo) show(tool string, res *mcp.CallToolResult) map[string]any {
	s := d.scr
	text := ""
	if len(res.Content) > 0 {
		if t, ok := res.Content[0].(*mcp.TextContent); ok {
			text = t.Text
		}
	}
	summary, body, _ := strings.Cut(text, "\n")
	mark := "✓"
	if res.IsError {
		mark = "✗"
	}
	audit := "[no audit]"
	if ref, _ := res.Meta["audit_ref"].(string); ref != "" {
		audit = "[audit #" + strings.TrimPrefix(ref, "audit:") + "]"
	}
	s.mark(2, mark, summary+"  "+audit)
	var m map[string]any
	if res.StructuredContent != nil && !res.IsError {
		b, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(b, &m)
	} else {
		_ = json.Unmarshal([]byte(body), &m)
	}
	if e, ok := m["error"].(map[string]any); ok {
		if h, _ := e["fix_hint"].(string); h != "" {
			s.line(4, "fix_hint: %s", h)
		}
		if n, _ := e["suggested_next_tool_calls"].([]any); len(n) > 0 {
			j, _ := json.Marshal(n[0])
			s.line(4, "suggested next call: %s", j)
		}
		if dt, _ := e["details"].(map[string]any); len(dt) > 0 && e["code"] == "invalid_argument" {
			j, _ := json.Marshal(dt)
			s.line(4, "details: %s", j)
		}
		return m
	}
	switch tool {
	case "logs_get_recent_audit_logs":
		s.line(4, "%-3s %-25s %-10s %-19s %s", "SEQ", "TOOL", "DECISION", "ERROR", "CHANNEL")
		for _, x := range m["entries"].([]any) {
			e := x.(map[string]any)
			decision := strings.TrimSuffix(fmt.Sprint(e["decision"]), "_by_user")
			if e["dry_run"] == true {
				decision += ", dry"
			}
			channel, _ := e["channel"].(string)
			s.line(4, "#%-2v %-25v %-10s %-19v %v", e["seq"], e["tool"], decision, orDash(e["error_code"]), orDash(strings.TrimPrefix(channel, "client:")))
		}
	case "system_get_capabilities":
		for _, x := range m["domains"].([]any) {
			dm := x.(map[string]any)
			avail := 0
			for _, t := range dm["tools"].([]any) {
				if t.(map[string]any)["available"] == true {
					avail++
				}
			}
			s.line(4, "%-8v enabled=%v, %d/%d tools available", dm["name"], dm["enabled"], avail, len(dm["tools"].([]any)))
		}
	case "process_list_processes":
		s.line(4, "%6s %-10s %6s %6s  %s", "PID", "USER", "%CPU", "%MEM", "COMMAND")
		for _, p := range m["processes"].([]any) {
			pm := p.(map[string]any)
			s.line(4, "%6v %-10v %6.1f %6.2f  %v", pm["pid"], pm["username"], pm["cpu_percent"], pm["memory_percent"], pm["name"])
		}
	case "gpio_list_pins":
		for _, p := range m["pins"].([]any) {
			pm := p.(map[string]any)
			s.line(4, "GPIO%-3v %-7v %-6v %v", pm["pin"], pm["name"], pm["mode"], orDash(pm["value"]))
		}
	case "manage_check_for_updates":
		o, _ := m["os"].(map[string]any)
		s.line(4, "raspi-mcp installed %v, candidate %v on %v", m["current_version"], m["latest_version"], orDash(m["channel"]))
		s.line(4, "OS: %v upgradable (%v security), %v held, reboot required %v, lists from %v",
			o["upgradable"], o["security"], o["held"], o["reboot_required"], o["lists_updated_at"])
	case "manage_preview_os_updates":
		for _, k := range []string{"upgrades", "installs", "removals"} {
			for _, x := range m[k].([]any) {
				c := x.(map[string]any)
				kind := strings.TrimSuffix(k, "s")
				if c["security"] == true {
					kind = "security" // an upgrade that fixes a vulnerability
				}
				s.line(4, "%-8s %-29v %v -> %v", kind, c["name"], orDash(c["from"]), orDash(c["to"]))
			}
		}
		s.line(4, "held: %v; download %.0f B; reboot needed %v", m["held"], m["download_bytes"], m["reboot_needed"])
		s.line(4, "plan_hash %v", m["plan_hash"])
	case "change_prepare":
		s.line(4, "token %v, expires %v", m["token"], m["expires_at"])
	case "change_commit":
		res, _ := m["result"].(map[string]any)
		st, _ := res["status"].(map[string]any)
		s.line(4, "job %v: %v; configuration files kept: %v", res["job_id"], st["status"], res["conffiles_kept"])
		for _, x := range res["packages"].([]any) {
			p := x.(map[string]any)
			s.line(4, "%-29v %v -> %v", p["name"], orDash(p["before"]), orDash(p["after"]))
		}
	case "system_reboot":
		if p, ok := m["plan"].([]any); ok {
			s.line(4, "plan: %v", p)
		}
	}
	return m
}

func orDash(v any) any {
	if v == nil || v == "" {
		return "-"
	}
	return v
}
