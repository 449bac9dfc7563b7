// Command demo is `make demo`: it starts raspi-mcp in laptop mode on the
// simulated board, walks an MCP session through `raspi-mcp stdio` with the Go
// SDK client, as a laptop's assistant would over ssh, prints it for a person,
// and stops everything.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	binDir := flag.String("bin", "bin", "directory with raspi-mcp and raspi-mcp-simhelper")
	flag.Parse()
	if err := run(*binDir); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(binDir string) error {
	raspi, err := filepath.Abs(filepath.Join(binDir, "raspi-mcp"))
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "raspi-mcp-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	logPath := filepath.Join(dir, "agent.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()

	step("Start the agent and its helper on the simulated board")
	fmt.Printf("  $ raspi-mcp serve --sim --dir %s\n", dir)
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
	fmt.Printf("  ready in %d ms\n", time.Since(start).Milliseconds())
	status, _ := exec.Command(raspi, "status", "--dir", dir).Output()
	fmt.Print(indent(string(status)))

	step("Connect like a laptop client does: the Go SDK client runs `raspi-mcp stdio`")
	fmt.Printf("  (on a Pi: ssh -T pi /usr/bin/raspi-mcp stdio)\n")
	ctx := context.Background()
	// The demo's client can ask its person (MCP elicitation), as Claude Code
	// and VS Code can: a scripted person reads each question, agrees to the
	// reboot and declines anything else.
	client := mcp.NewClient(&mcp.Implementation{Name: "raspi-mcp-demo", Version: "1"}, &mcp.ClientOptions{
		LoggingMessageHandler: relayWaiting,
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			fmt.Printf("  ? the agent asks the person:\n%s", indent(indent(req.Params.Message)))
			if strings.Contains(req.Params.Message, "system_reboot") {
				fmt.Printf("  ! the person ticks confirm and accepts\n")
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true, "note": "ok, after the backup"}}, nil
			}
			fmt.Printf("  ! the person declines\n")
			return &mcp.ElicitResult{Action: "decline"}, nil
		},
	})
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: exec.Command(raspi, "stdio", "--dir", dir)}, nil)
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
	names := []string{}
	for _, t := range tools.Tools {
		names = append(names, t.Name)
	}
	fmt.Printf("  %d tools: %s\n", len(names), strings.Join(names, ", "))

	step("Load the device into context cheaply: the summary resource")
	fmt.Printf("  → resources/read raspi://state/summary\n")
	sum, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "raspi://state/summary"})
	if err != nil {
		return err
	}
	text := sum.Contents[0].Text
	fmt.Printf("  %d bytes, ~%d tokens:\n%s", len(text), len(text)/4, indent(text+"\n"))
	step("A prompt names the exact tools and resources for a job")
	fmt.Printf("  → prompts/get triage_failed_unit {\"unit\": \"backup\"}\n")
	pr, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "triage_failed_unit", Arguments: map[string]string{"unit": "backup"}})
	if err != nil {
		return err
	}
	fmt.Print(indent(pr.Messages[0].Content.(*mcp.TextContent).Text + "\n"))

	calls := []struct {
		title string
		tool  string
		args  map[string]any
	}{
		{"How is the board doing?", "system_get_health_snapshot", nil},
		{"What does this device have, and what may I do?", "system_get_capabilities", nil},
		{"History is recorded from the first start (default job every 10 s, kept 48 h)", "metrics_get_summary", map[string]any{"window": "5m"}},
		{"What is wired to the board?", "gpio_list_pins", nil},
		{"Switch the relay on for 2 seconds (a lease: it turns itself off)", "gpio_write_pin", map[string]any{"pin": 17, "value": "high", "duration_ms": 2000, "reason": "demo: water the plants"}},
		{"A pin the owner did not allow is refused", "gpio_write_pin", map[string]any{"pin": 5, "value": "high"}},
		{"The greenhouse sensor, in units (BME280 on I2C bus 1)", "sensors_read", map[string]any{"name": "greenhouse"}},
		{"What is using the CPU? (the simulated board's processes: laptop mode never lists or signals the laptop's)", "process_list_processes", map[string]any{"limit": 5}},
		{"root's processes are protected: TERM to the board's sshd is refused", "process_send_signal", map[string]any{"pid": 496, "signal": "TERM", "confirm": true, "reason": "demo"}},
		{"A reboot without confirm and reason is refused (high risk)", "system_reboot", map[string]any{"delay_seconds": 60}},
		{"A dry run shows the plan and changes nothing", "system_reboot", map[string]any{"dry_run": true, "delay_seconds": 60}},
		{"Confirmed, with a reason, and asked of the person: the helper schedules it (recorded, not performed, on the sim board)", "system_reboot",
			map[string]any{"confirm": true, "reason": "demo: apply kernel update", "delay_seconds": 60}},
		{"Bad input gets a structured invalid_argument", "system_reboot", map[string]any{"delay_seconds": "soon"}},
		{"The audit trail of this session", "logs_get_recent_audit_logs", map[string]any{"limit": 10, "oldest_first": true}},
		{"Is the hash chain intact?", "logs_verify_audit_chain", nil},
	}
	closing := calls[len(calls)-2:]
	calls = calls[:len(calls)-2]
	run := func(c struct {
		title string
		tool  string
		args  map[string]any
	}) error {
		step(c.title)
		argJSON, _ := json.Marshal(c.args)
		if c.args == nil {
			argJSON = []byte("{}")
		}
		fmt.Printf("  → %s %s\n", c.tool, argJSON)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
		if err != nil {
			return err
		}
		show(c.tool, res)
		return nil
	}
	for _, c := range calls {
		if err := run(c); err != nil {
			return err
		}
	}
	if err := shutdownAtTheConsole(ctx, cs, raspi, dir); err != nil {
		return err
	}
	if err := osUpdates(ctx, raspi, dir); err != nil {
		return err
	}
	for _, c := range closing {
		if err := run(c); err != nil {
			return err
		}
	}

	step("On the device, a person checks the audit trail")
	out, _ := exec.Command(raspi, "audit", "verify", "--dir", dir).CombinedOutput()
	fmt.Printf("  $ raspi-mcp audit verify\n%s", indent(string(out)))
	power, _ := os.ReadFile(filepath.Join(dir, "power.log"))
	fmt.Printf("  sim board power log:\n%s", indent(string(power)))
	step("Stop (SIGTERM)")
	return nil
}

// osUpdates walks the OS update tools on the simulated package manager:
// check, preview (which refreshes the lists), the critical apply through
// change_prepare and change_commit, and the check again.
//
// It uses a second client, one that cannot ask its person (a script, or
// an assistant without elicitation): for it a critical call goes through
// the change token, which the person approves by letting the commit run.
func osUpdates(ctx context.Context, raspi, dir string) error {
	client := mcp.NewClient(&mcp.Implementation{Name: "raspi-mcp-demo-updates", Version: "1"}, &mcp.ClientOptions{
		LoggingMessageHandler: relayWaiting,
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			fmt.Printf("    … %3.0f%% %s\n", req.Params.Progress, req.Params.Message)
		},
	})
	step("OS updates, from a client that cannot ask its person: critical calls take a change token")
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: exec.Command(raspi, "stdio", "--dir", dir)}, nil)
	if err != nil {
		return err
	}
	defer cs.Close()
	if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "notice"}); err != nil {
		return err
	}
	call := func(title, tool string, args map[string]any, progress bool) (map[string]any, error) {
		step(title)
		argJSON, _ := json.Marshal(args)
		fmt.Printf("  → %s %s\n", tool, argJSON)
		p := &mcp.CallToolParams{Name: tool, Arguments: args}
		if progress {
			p.SetProgressToken("demo-os-update")
		}
		res, err := cs.CallTool(ctx, p)
		if err != nil {
			return nil, err
		}
		show(tool, res)
		var m map[string]any
		if res.IsError {
			return nil, fmt.Errorf("%s failed", tool)
		}
		b, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(b, &m)
		return m, nil
	}
	if _, err := call("Is anything waiting? raspi-mcp and the OS", "manage_check_for_updates", map[string]any{}, false); err != nil {
		return err
	}
	pre, err := call("Preview the OS updates: the lists are refreshed, nothing is installed", "manage_preview_os_updates", map[string]any{}, false)
	if err != nil {
		return err
	}
	prep, err := call("Applying is critical: change_prepare binds a token to exactly this plan_hash", "change_prepare",
		map[string]any{"tool": "manage_apply_os_updates", "arguments": map[string]any{"plan_hash": pre["plan_hash"], "reason": "demo: monthly updates"}}, false)
	if err != nil {
		return err
	}
	// A change token is something a model can get by itself: critical
	// calls wait for the owner at the Pi, who presses the board's button.
	pressed := make(chan []byte, 1)
	go func() {
		out, _ := exec.Command(raspi, "sim", "press", "--wait", "30s", "--dir", dir).CombinedOutput()
		pressed <- out
	}()
	if _, err := call("change_commit waits for the owner at the Pi, who presses the button: then it installs exactly the previewed versions, with progress", "change_commit",
		map[string]any{"token": prep["token"]}, true); err != nil {
		return err
	}
	fmt.Printf("  (meanwhile, at the Pi) $ raspi-mcp sim press\n%s", indent(string(<-pressed)))
	_, err = call("Checked again: nothing left but the held package, and a reboot is required", "manage_check_for_updates", map[string]any{}, false)
	return err
}

func step(s string) { fmt.Printf("\n== %s\n", s) }

// relayWaiting prints what the agent tells the client while a call waits
// for the device: the message an assistant relays to its person.
func relayWaiting(_ context.Context, req *mcp.LoggingMessageRequest) {
	if d, ok := req.Params.Data.(map[string]any); ok && d["event"] == "approval_waiting" {
		fmt.Printf("  … the client is told: %v\n", d["message"])
	}
}

// shutdownAtTheConsole calls a critical tool from the assistant and has
// the person at the Pi answer it with `raspi-mcp approve`: the console
// shows who asks, the tool and its plan, and the person says no.
func shutdownAtTheConsole(ctx context.Context, cs *mcp.ClientSession, raspi, dir string) error {
	step("Shutdown is critical: it waits for the owner at the Pi, who reads it at the console and says no")
	// force replaces the reboot scheduled above, if the person agrees.
	args := map[string]any{"reason": "demo: moving the Pi", "force": true}
	argJSON, _ := json.Marshal(args)
	fmt.Printf("  → system_shutdown %s\n", argJSON)
	console := make(chan []byte, 1)
	go func() {
		cmd := exec.Command(raspi, "approve", "--wait", "30s", "--dir", dir)
		cmd.Stdin = strings.NewReader("n\n")
		out, _ := cmd.CombinedOutput()
		console <- out
	}()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "system_shutdown", Arguments: args})
	if err != nil {
		return err
	}
	fmt.Printf("  (meanwhile, at the Pi) $ raspi-mcp approve\n%s", indent(string(<-console)))
	show("system_shutdown", res)
	return nil
}

func indent(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		b.WriteString("    " + l + "\n")
	}
	return b.String()
}

// show prints the one-line summary, and for a few tools the interesting part.
func show(tool string, res *mcp.CallToolResult) {
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
	fmt.Printf("  %s %s   [audit %v, %v ms]\n", mark, summary, orDash(res.Meta["audit_ref"]), res.Meta["duration_ms"])
	var m map[string]any
	_ = json.Unmarshal([]byte(body), &m)
	if e, ok := m["error"].(map[string]any); ok {
		if h, _ := e["fix_hint"].(string); h != "" {
			fmt.Printf("    fix_hint: %s\n", h)
		}
		if n, _ := e["suggested_next_tool_calls"].([]any); len(n) > 0 {
			j, _ := json.Marshal(n[0])
			fmt.Printf("    suggested next call: %s\n", j)
		}
		if d, _ := e["details"].(map[string]any); len(d) > 0 && e["code"] == "invalid_argument" {
			j, _ := json.Marshal(d)
			fmt.Printf("    details: %s\n", j)
		}
		return
	}
	switch tool {
	case "logs_get_recent_audit_logs":
		for _, x := range m["entries"].([]any) {
			e := x.(map[string]any)
			fmt.Printf("    #%v %-9v %-28v %-5v dry_run=%-5v %v %v\n", e["seq"], e["principal"], e["tool"], e["decision"], e["dry_run"], orDash(e["error_code"]), e["hash"].(string)[:19]+"…")
		}
	case "system_get_capabilities":
		for _, d := range m["domains"].([]any) {
			dm := d.(map[string]any)
			avail := 0
			for _, t := range dm["tools"].([]any) {
				if t.(map[string]any)["available"] == true {
					avail++
				}
			}
			fmt.Printf("    %-8v enabled=%v, %d/%d tools available\n", dm["name"], dm["enabled"], avail, len(dm["tools"].([]any)))
		}
	case "process_list_processes":
		fmt.Printf("    %6s %-10s %6s %6s  %s\n", "PID", "USER", "%CPU", "%MEM", "COMMAND")
		for _, p := range m["processes"].([]any) {
			pm := p.(map[string]any)
			fmt.Printf("    %6v %-10v %6.1f %6.2f  %v\n", pm["pid"], pm["username"], pm["cpu_percent"], pm["memory_percent"], pm["name"])
		}
	case "gpio_list_pins":
		for _, p := range m["pins"].([]any) {
			pm := p.(map[string]any)
			fmt.Printf("    GPIO%-3v %-7v %-6v %v\n", pm["pin"], pm["name"], pm["mode"], orDash(pm["value"]))
		}
	case "manage_check_for_updates":
		o, _ := m["os"].(map[string]any)
		fmt.Printf("    raspi-mcp installed %v, candidate %v on %v; OS: %v upgradable (%v security), %v held, reboot required %v, lists from %v\n",
			m["current_version"], m["latest_version"], orDash(m["channel"]), o["upgradable"], o["security"], o["held"], o["reboot_required"], o["lists_updated_at"])
	case "manage_preview_os_updates":
		for _, k := range []string{"upgrades", "installs", "removals"} {
			for _, x := range m[k].([]any) {
				c := x.(map[string]any)
				sec := ""
				if c["security"] == true {
					sec = " (security)"
				}
				fmt.Printf("    %-9s %-32v %v -> %v%s\n", strings.TrimSuffix(k, "s"), c["name"], orDash(c["from"]), orDash(c["to"]), sec)
			}
		}
		fmt.Printf("    held: %v; download %.0f B; reboot needed %v\n    plan_hash %v\n", m["held"], m["download_bytes"], m["reboot_needed"], m["plan_hash"])
	case "change_prepare":
		fmt.Printf("    token %v, expires %v\n", m["token"], m["expires_at"])
	case "change_commit":
		res, _ := m["result"].(map[string]any)
		st, _ := res["status"].(map[string]any)
		fmt.Printf("    job %v: %v; configuration files kept: %v\n", res["job_id"], st["status"], res["conffiles_kept"])
		for _, x := range res["packages"].([]any) {
			p := x.(map[string]any)
			fmt.Printf("    %-32v %v -> %v\n", p["name"], orDash(p["before"]), orDash(p["after"]))
		}
	case "system_reboot":
		if p, ok := m["plan"].([]any); ok {
			fmt.Printf("    plan: %v\n", p)
		}
	}
}

func orDash(v any) any {
	if v == nil || v == "" {
		return "-"
	}
	return v
}
