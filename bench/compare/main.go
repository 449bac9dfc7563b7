// Command compare runs raspi-mcp (`serve --sim` behind `raspi-mcp stdio`)
// and the reference Node server (@modelcontextprotocol/server-everything,
// stdio mode) side by side in one process tree and one run, and prints the
// figures of issue 15 as a table: CPU per cheap call from /proc/PID/stat,
// context switches, RSS/Pss, bridge figures, SD bytes per day from
// /proc/PID/io, bytes per audited call, the health read against python's
// psutil, and the armv6 binary sizes. A second table gives the agent's CPU
// per cheap call in each protocol era (-eras: a session opened as go-sdk's
// client opens it in 2025-11-25 and in 2026-07-28, the latter with the
// SEP-2575 `_meta` triple on every request) beside Node's echo, in turns.
//
// The machine it runs on is shared and noisy, so it prints ratios measured
// in the same run next to the absolute numbers, and it never judges: it is
// `make bench-compare`, not a test.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/raspi-mcp/raspi-mcp/hw/sysinfo"
)

type options struct {
	bin, npm, python string
	calls, warm      int
	total            int
	sd               bool
	flush            time.Duration
	sizes            bool
	armLDFlags       string
	sizeBaseline     string
	curve            string
	bridgeAB         string
	eras             string
	eraReps          int
	erasOnly         bool
	eraGC            string
}

func main() {
	var o options
	flag.StringVar(&o.bin, "bin", "bin", "directory holding raspi-mcp and raspi-mcp-simhelper")
	flag.StringVar(&o.npm, "npm", ".cache/npm", "npm prefix of `make tools` (server-everything)")
	flag.StringVar(&o.python, "python", "/usr/bin/python3", "a python3 with psutil (apt-get install python3-psutil)")
	flag.IntVar(&o.warm, "warm", 500, "warm-up calls before measuring")
	flag.IntVar(&o.calls, "calls", 3000, "measured calls")
	flag.IntVar(&o.total, "total", 10000, "calls before the 'after N calls' memory figure")
	flag.BoolVar(&o.sd, "sd", true, "measure SD writes over two whole flush intervals (minutes)")
	flag.DurationVar(&o.flush, "flush", 0, "flush interval to measure over; 0 reads it from config.example.toml")
	flag.BoolVar(&o.sizes, "sizes", true, "build the armv6 stripped binaries and print their sizes")
	flag.StringVar(&o.armLDFlags, "arm-ldflags", "-s -w -R 0x4000", "linker flags of the armv6 size builds (make bench-compare passes the Makefile's ARM32_LDFLAGS)")
	flag.StringVar(&o.sizeBaseline, "size-baseline", "6f3a6a4", "also build the armv6 agent of this commit (the size target's baseline) with the same flags; empty: don't")
	flag.StringVar(&o.curve, "gc-curve", "", "also measure the agent under each GOGC[/GOMEMLIMIT[/GOMAXPROCS]] of this comma-separated list, e.g. 100//0,off/24MiB/0,400/24MiB/1 (GOMAXPROCS 0: one per core)")
	flag.StringVar(&o.bridgeAB, "bridge-ab", "", "another raspi-mcp binary whose `stdio` bridge is measured in turn with ours against the same agent")
	flag.StringVar(&o.eras, "eras", "2025-11-25,2026-07-28", "protocol eras whose agent CPU per cheap call is measured in turns with each other and Node's echo (a second table); empty: don't")
	flag.IntVar(&o.eraReps, "era-reps", 5, "turns of the eras table: each turn measures -calls calls of every era and of Node")
	flag.BoolVar(&o.erasOnly, "eras-only", false, "print only the eras table")
	flag.StringVar(&o.eraGC, "era-gc", "", "also measure the eras under each collector setting GOGC[/GOMEMLIMIT[/GOMAXPROCS]] of this comma-separated list (an empty field: the config's), each on an agent of its own whose turns join the same rounds, e.g. 100,off/32MiB")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "bench-compare:", err)
		os.Exit(1)
	}
}

type row struct{ figure, ours, ref, ratio string }

func run(o options) error {
	dir, err := os.MkdirTemp("", "bench-compare-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	raspi := filepath.Join(o.bin, "raspi-mcp")
	if o.flush == 0 {
		o.flush = exampleFlush()
	}
	cfg := filepath.Join(dir, "c.toml")
	if err := os.WriteFile(cfg, []byte("[metrics]\ndefault_interval = \"5s\"\n"), 0o600); err != nil {
		return err
	}

	// --- raspi-mcp ---
	agent, err := startAgent(raspi, filepath.Join(dir, "s"), cfg, nil)
	if err != nil {
		return err
	}
	defer stopAgent(agent)
	apid := agent.Process.Pid
	time.Sleep(2 * time.Second)
	aIdle := readMem(apid)

	if o.erasOnly {
		return eraTable(o, raspi, dir, apid)
	}
	if o.curve != "" {
		if err := gcCurve(o, raspi, dir, cfg); err != nil {
			return err
		}
	}
	if o.bridgeAB != "" {
		if err := bridgeAB(o, raspi, filepath.Join(dir, "s"), apid); err != nil {
			return err
		}
	}
	bridge, err := startStdio(exec.Command(raspi, "stdio", "--dir", filepath.Join(dir, "s")))
	if err != nil {
		return err
	}
	bIdle := readMem(bridge.cmd.Process.Pid)
	basic := `"name":"system_get_basic_info","arguments":{}`
	ours, err := measureCalls(bridge, apid, basic, o)
	if err != nil {
		return fmt.Errorf("raspi-mcp: %w", err)
	}
	bAfter := readMem(bridge.cmd.Process.Pid)

	// An audited call: a refused one (unknown argument) is always recorded.
	io0 := readIO(apid)
	const audited = 200
	for range audited {
		if _, err := bridge.call(`"name":"system_get_basic_info","arguments":{"no_such_argument":1}`); err != nil {
			return err
		}
	}
	io1 := readIO(apid)
	bridge.close()

	var sdWB, sdWC float64
	if o.sd {
		window := 2 * o.flush
		w0 := readIO(apid)
		time.Sleep(window)
		w1 := readIO(apid)
		day := float64(24*time.Hour) / float64(window)
		sdWB, sdWC = float64(w1.writeBytes-w0.writeBytes)*day, float64(w1.wchar-w0.wchar)*day
	}

	// --- server-everything ---
	var ref callFigures
	node, err := startNode(o.npm)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-compare: server-everything:", err, "(run make tools)")
	} else {
		ref, err = measureCalls(node, node.cmd.Process.Pid, `"name":"echo","arguments":{"message":"hi"}`, o)
		node.close()
		if err != nil {
			return fmt.Errorf("server-everything: %w", err)
		}
	}

	goHealth, goAllocs := healthCost(2000)
	pyHealth, pyErr := psutilCost(o.python, 2000)

	rows := []row{
		{"agent CPU per cheap call (raspi: system_get_basic_info; node: echo)", us(ours.cpu), us(ref.cpu), ratio(ours.cpu, ref.cpu)},
		{"bridge (`raspi-mcp stdio`) CPU per call", fmt.Sprintf("%.1f µs", ours.bridgeCPU), "–", pct(ours.bridgeCPU, ours.cpu) + " of agent"},
		{"agent + bridge CPU per call", us(ours.cpu + ours.bridgeCPU), us(ref.cpu), ratio(ours.cpu+ours.bridgeCPU, ref.cpu)},
		{"context switches per call, agent", f1(ours.cs), f1(ref.cs), ratio(ours.cs, ref.cs)},
		{"context switches per call, bridge", f1(ours.bridgeCS), "–", "–"},
		{"bridge RSS / Pss / USS per session, idle", mem(bIdle), "–", "–"},
		{fmt.Sprintf("bridge RSS / Pss / USS after %d calls", o.total), mem(bAfter), "–", "–"},
		{"agent RSS / Pss / USS idle", mem(aIdle), mem(ref.idle), ratio(float64(aIdle.rss), float64(ref.idle.rss))},
		{fmt.Sprintf("agent RSS / Pss / USS after %d calls", o.total), mem(ours.after), mem(ref.after), ratio(float64(ours.after.rss), float64(ref.after.rss))},
		{"bytes per audited call (write_bytes; wchar)", fmt.Sprintf("%.0f B; %.0f B", float64(io1.writeBytes-io0.writeBytes)/audited, float64(io1.wchar-io0.wchar)/audited), "–", "–"},
	}
	if o.sd {
		rows = append(rows, row{fmt.Sprintf("SD writes per day, 5 s sampling, over 2 flushes of %s (write_bytes; wchar)", o.flush),
			fmt.Sprintf("%.2f MB; %.2f MB", sdWB/1e6, sdWC/1e6), "target ≤ 3 MB", ratio(sdWB, 3e6)})
	}
	py := "psutil unavailable: " + fmt.Sprint(pyErr)
	if pyErr == nil {
		py = us(pyHealth)
	}
	rows = append(rows, row{"health read on live /proc and /sys (CPU per read)", fmt.Sprintf("%s, %.0f allocs", us(goHealth), goAllocs), py, ratio(goHealth, pyHealth)})
	if o.sizes {
		a, h, err := armSizes(dir, ".", o.armLDFlags)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench-compare: armv6 build:", err)
		} else {
			rows = append(rows, row{"armv6 stripped binaries, agent / helper", fmt.Sprintf("%.2f / %.2f MiB", a, h), "11.9 / 5.1 MiB (6f3a6a4, the target's baseline)", ratio(a, 11.9) + " / " + ratio(h, 5.1)})
			// The baseline's tree built the same way separates what the
			// build saves from what the code added since weighs.
			if o.sizeBaseline != "" {
				if b, err := baselineAgentSize(dir, o.sizeBaseline, o.armLDFlags); err != nil {
					fmt.Fprintln(os.Stderr, "bench-compare: armv6 build of", o.sizeBaseline+":", err)
				} else {
					rows = append(rows, row{"armv6 agent of " + o.sizeBaseline + " built with these flags: code added since", fmt.Sprintf("%.2f MiB; +%.2f MiB", b, a-b), "11.9 MiB", ratio(b, 11.9)})
				}
			}
		}
	}
	fmt.Printf("\n%d calls measured after %d warm-up calls; CPU is the threads' schedstat run time, switches are voluntary+nonvoluntary of every thread\n\n", o.calls, o.warm)
	fmt.Println("| figure | raspi-mcp | reference | ratio |")
	fmt.Println("|---|---|---|---|")
	for _, r := range rows {
		fmt.Printf("| %s | %s | %s | %s |\n", r.figure, r.ours, r.ref, r.ratio)
	}
	if o.eras != "" {
		return eraTable(o, raspi, dir, apid)
	}
	return nil
}

// nodeEra is the newest protocol version server-everything speaks.
const nodeEra = "2025-11-25"

// eraTable measures the agent's CPU per cheap call (system_get_basic_info
// over `raspi-mcp stdio`) with a session of each protocol era of o.eras,
// and Node's echo, in turns, o.eraReps rounds of o.calls calls a turn, so
// every figure sees the same load on a shared machine. Each round runs
// every turn once, starting one turn later than the round before, so no
// turn always follows the same one (a collection the previous turn's
// garbage set off is not always charged to the same figure). With
// o.eraGC, each of its collector settings gets an agent of its own (dir/gcN)
// whose sessions take their turns in the same rounds, and the table gives
// every agent's memory after the calls.
//
// A row gives the median turn [min–max] and the medians of the rounds'
// ratios: to Node's turn and to the first era's turn of the same agent in
// the same round. The ratios are the figures to read on a noisy machine;
// the absolute numbers move with the load.
func eraTable(o options, raspi, dir string, apid int) error {
	type agentUnder struct {
		label string // the collector setting, "config" for the config's
		pid   int
		cmd   *exec.Cmd // nil: the main agent, stopped by run
	}
	type turn struct {
		name  string
		agent *agentUnder
		s     *session
		pid   int
		args  string
		cpu   []float64
		first *turn // the first era's turn of the same agent
	}
	var turns []*turn
	agents := []*agentUnder{{label: "config", pid: apid}}
	defer func() {
		for _, t := range turns {
			t.s.close()
		}
		for _, a := range agents {
			if a.cmd != nil {
				stopAgent(a.cmd)
			}
		}
	}()
	if o.eraGC != "" {
		cfg := filepath.Join(dir, "c.toml")
		for i, item := range strings.Split(o.eraGC, ",") {
			item = strings.TrimSpace(item)
			cmd, err := startAgent(raspi, filepath.Join(dir, fmt.Sprintf("egc%d", i)), cfg, gcEnv(item))
			if err != nil {
				return fmt.Errorf("agent under %s: %w", item, err)
			}
			agents = append(agents, &agentUnder{label: item, pid: cmd.Process.Pid, cmd: cmd})
		}
	}
	basic := `"name":"system_get_basic_info","arguments":{}`
	for i, a := range agents {
		sock := filepath.Join(dir, "s")
		if i > 0 {
			sock = filepath.Join(dir, fmt.Sprintf("egc%d", i-1))
		}
		var first *turn
		for _, era := range strings.Split(o.eras, ",") {
			era = strings.TrimSpace(era)
			s, err := startStdioEra(exec.Command(raspi, "stdio", "--dir", sock), era)
			if err != nil {
				return fmt.Errorf("%s: %w", era, err)
			}
			t := &turn{name: era, agent: a, s: s, pid: a.pid, args: basic}
			if first == nil {
				first = t
			}
			t.first = first
			turns = append(turns, t)
		}
	}
	var node *turn
	if s, err := startNodeEra(o.npm, nodeEra); err != nil {
		fmt.Fprintln(os.Stderr, "bench-compare: server-everything:", err, "(run make tools)")
	} else {
		node = &turn{name: "node", s: s, pid: s.cmd.Process.Pid, args: `"name":"echo","arguments":{"message":"hi"}`}
		turns = append(turns, node)
	}
	for _, t := range turns {
		for range o.warm {
			if _, err := t.s.call(t.args); err != nil {
				return fmt.Errorf("%s: %w", t.name, err)
			}
		}
	}
	for round := range o.eraReps {
		for i := range turns {
			t := turns[(i+round)%len(turns)]
			c0 := readCPU(t.pid)
			for range o.calls {
				if _, err := t.s.call(t.args); err != nil {
					return fmt.Errorf("%s: %w", t.name, err)
				}
			}
			c1 := readCPU(t.pid)
			t.cpu = append(t.cpu, float64(c1.ns-c0.ns)/1e3/float64(o.calls))
		}
	}
	fmt.Printf("\nprotocol eras: agent CPU per cheap call (system_get_basic_info over `raspi-mcp stdio`) beside server-everything's echo (%s), %d rounds of one turn of %d calls each, the turns' order rotated each round; median turn [min–max]; a ratio is the median of the rounds' ratios\n\n", nodeEra, o.eraReps, o.calls)
	fmt.Println("| collector (GOGC/GOMEMLIMIT/GOMAXPROCS) | era | agent µs CPU/call | Node µs CPU/call | ratio to Node | ratio to " + turns[0].name + " |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, t := range turns {
		if t == node {
			continue
		}
		toNode, nodeCPU := "–", "–"
		if node != nil {
			toNode = fmt.Sprintf("%.2fx", median(ratios(t.cpu, node.cpu)))
			nodeCPU = spread(node.cpu)
		}
		toFirst := fmt.Sprintf("%.2fx", median(ratios(t.cpu, t.first.cpu)))
		fmt.Printf("| %s | %s | %s | %s | %s | %s |\n", t.agent.label, t.name, spread(t.cpu), nodeCPU, toNode, toFirst)
	}
	if len(agents) > 1 {
		fmt.Printf("\nmemory of each agent after its sessions' %d calls (RSS / Pss / USS)\n\n", len(strings.Split(o.eras, ","))*(o.warm+o.eraReps*o.calls))
		fmt.Println("| collector | memory |")
		fmt.Println("|---|---|")
		for _, a := range agents {
			fmt.Printf("| %s | %s |\n", a.label, mem(readMem(a.pid)))
		}
	}
	return nil
}

// gcEnv is the environment of a collector setting GOGC[/GOMEMLIMIT[/GOMAXPROCS]]
// (an empty field is left out: the config's setting holds).
func gcEnv(item string) []string {
	f := strings.Split(strings.TrimSpace(item), "/")
	var env []string
	if f[0] != "" {
		env = append(env, "GOGC="+f[0])
	}
	if len(f) > 1 && f[1] != "" {
		env = append(env, "GOMEMLIMIT="+f[1])
	}
	if len(f) > 2 && f[2] != "" {
		env = append(env, "GOMAXPROCS="+f[2])
	}
	return env
}

func ratios(a, b []float64) []float64 {
	r := make([]float64, len(a))
	for i := range a {
		r[i] = a[i] / b[i]
	}
	return r
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

func spread(v []float64) string {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return fmt.Sprintf("%.0f [%.0f–%.0f]", median(s), s[0], s[len(s)-1])
}

// startAgent starts `serve --sim` in dir with extra environment and waits
// until `raspi-mcp status` answers.
func startAgent(raspi, dir, cfg string, env []string) (*exec.Cmd, error) {
	agent := exec.Command(raspi, "serve", "--sim", "--dir", dir, "--config", cfg)
	agent.Stderr = io.Discard
	agent.Env = append(os.Environ(), env...)
	if err := agent.Start(); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(60 * time.Second)
	for exec.Command(raspi, "status", "--dir", dir).Run() != nil {
		if time.Now().After(deadline) {
			stopAgent(agent)
			return nil, errors.New("the agent did not become ready in 60 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return agent, nil
}

func stopAgent(agent *exec.Cmd) { _ = agent.Process.Signal(os.Interrupt); _ = agent.Wait() }

// gcCurve measures the agent's CPU per call against its memory for each
// collector setting of o.curve: "GOGC[/GOMEMLIMIT]" items, comma separated,
// given to the agent as its environment (which wins over the config).
func gcCurve(o options, raspi, dir, cfg string) error {
	fmt.Println("\nGC curve: agent CPU and memory per collector setting (system_get_basic_info over `raspi-mcp stdio`)")
	fmt.Println()
	fmt.Println("| GOGC / GOMEMLIMIT / GOMAXPROCS (0: one per core; absent: the config's) | agent CPU per call | switches per call | RSS / Pss / USS idle | RSS / Pss / USS after calls |")
	fmt.Println("|---|---|---|---|---|")
	for i, item := range strings.Split(o.curve, ",") {
		env := gcEnv(item)
		sub := filepath.Join(dir, fmt.Sprintf("gc%d", i))
		agent, err := startAgent(raspi, sub, cfg, env)
		if err != nil {
			return err
		}
		time.Sleep(2 * time.Second)
		idle := readMem(agent.Process.Pid)
		s, err := startStdio(exec.Command(raspi, "stdio", "--dir", sub))
		if err != nil {
			stopAgent(agent)
			return err
		}
		fig, err := measureCalls(s, agent.Process.Pid, `"name":"system_get_basic_info","arguments":{}`, o)
		s.close()
		stopAgent(agent)
		if err != nil {
			return err
		}
		fmt.Printf("| %s | %s | %.1f | %s | %s |\n", item, us(fig.cpu), fig.cs, mem(idle), mem(fig.after))
	}
	return nil
}

// bridgeAB measures two bridges against one agent, in turns (ABABAB), so
// both see the same load on this shared machine.
func bridgeAB(o options, raspi, dir string, apid int) error {
	fmt.Println("\nbridge A/B: CPU and switches per call of `stdio`, in turns against one agent")
	fmt.Println()
	fmt.Println("| turn | bridge | bridge CPU per call | bridge switches per call | agent CPU per call |")
	fmt.Println("|---|---|---|---|---|")
	ab := o
	ab.total = o.warm + o.calls
	for turn := range 6 {
		bin := raspi
		if turn%2 == 1 {
			bin = o.bridgeAB
		}
		s, err := startStdio(exec.Command(bin, "stdio", "--dir", dir))
		if err != nil {
			return err
		}
		f, err := measureCalls(s, apid, `"name":"system_get_basic_info","arguments":{}`, ab)
		s.close()
		if err != nil {
			return err
		}
		fmt.Printf("| %d | %s | %s | %.1f | %s |\n", turn, bin, us(f.bridgeCPU), f.bridgeCS, us(f.cpu))
	}
	return nil
}

// session is a child MCP server on pipes, spoken to in raw JSON lines so
// the client's own cost stays out of the child's figures.
type session struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
	id  int
	// meta is the `_meta` member every request's params begin with: the
	// SEP-2575 triple from 2026-07-28 on, empty before.
	meta string
}

// benchEra is the protocol version of the main table's sessions.
const benchEra = "2025-06-18"

func startStdio(cmd *exec.Cmd) (*session, error) { return startStdioEra(cmd, benchEra) }

// startStdioEra opens the session in the protocol era as the go-sdk v1.8
// client does: initialize and notifications/initialized up to 2025-11-25;
// from 2026-07-28 on, server/discover and the `_meta` triple (protocol
// version, client info, client capabilities) on every request.
func startStdioEra(cmd *exec.Cmd, era string) (*session, error) {
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &session{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<20)}
	if era >= "2026-07-28" {
		s.meta = `"_meta":{"io.modelcontextprotocol/clientCapabilities":{"roots":{"listChanged":true}},"io.modelcontextprotocol/clientInfo":{"name":"bench-compare","version":"1"},"io.modelcontextprotocol/protocolVersion":"` + era + `"},`
		if _, err := s.request("server/discover", `{}`); err != nil {
			s.close()
			return nil, fmt.Errorf("server/discover: %w", err)
		}
		return s, nil
	}
	if _, err := s.request("initialize", `{"protocolVersion":"`+era+`","capabilities":{},"clientInfo":{"name":"bench-compare","version":"1"}}`); err != nil {
		s.close()
		return nil, fmt.Errorf("initialize: %w", err)
	}
	if _, err := io.WriteString(in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"); err != nil {
		return nil, err
	}
	return s, nil
}

func startNode(npm string) (*session, error) { return startNodeEra(npm, benchEra) }

func startNodeEra(npm, era string) (*session, error) {
	index := filepath.Join(npm, "node_modules/@modelcontextprotocol/server-everything/dist/index.js")
	if _, err := os.Stat(index); err != nil {
		return nil, err
	}
	node := filepath.Join(npm, "node_modules/.bin/node")
	if _, err := os.Stat(node); err != nil {
		node = "node"
	}
	return startStdioEra(exec.Command(node, index, "stdio"), era)
}

func (s *session) request(method, params string) ([]byte, error) {
	s.id++
	if s.meta != "" {
		params = "{" + s.meta + strings.TrimPrefix(params, "{")
		if strings.HasSuffix(params, ",}") {
			params = strings.TrimSuffix(params, ",}") + "}"
		}
	}
	want := []byte(fmt.Sprintf(`"id":%d`, s.id))
	if _, err := fmt.Fprintf(s.in, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`+"\n", s.id, method, params); err != nil {
		return nil, err
	}
	for {
		line, err := s.out.ReadBytes('\n')
		if err != nil {
			return nil, err
		}
		// Notifications (logging, list changes) may come in between.
		if bytes.Contains(line, want) {
			// A JSON-RPC error; a tool's error has a string code.
			if bytes.Contains(line, []byte(`"error":{"code":-`)) {
				return line, fmt.Errorf("%s: %s", method, line)
			}
			return line, nil
		}
	}
}

func (s *session) call(nameArgs string) ([]byte, error) {
	return s.request("tools/call", "{"+nameArgs+"}")
}

func (s *session) close() {
	s.in.Close()
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
}

type callFigures struct {
	cpu, cs             float64 // agent (server) µs and switches per call
	bridgeCPU, bridgeCS float64
	idle, after         memFig
}

// measureCalls warms up, measures CPU and switches over o.calls calls of
// the server (pid) and, when the session is a bridge, of the bridge, then
// calls up to o.total and reads memory.
func measureCalls(s *session, pid int, nameArgs string, o options) (callFigures, error) {
	var f callFigures
	f.idle = readMem(pid)
	bpid := s.cmd.Process.Pid
	for range o.warm {
		if _, err := s.call(nameArgs); err != nil {
			return f, err
		}
	}
	c0, b0 := readCPU(pid), readCPU(bpid)
	for range o.calls {
		if _, err := s.call(nameArgs); err != nil {
			return f, err
		}
	}
	c1, b1 := readCPU(pid), readCPU(bpid)
	n := float64(o.calls)
	f.cpu, f.cs = float64(c1.ns-c0.ns)/1e3/n, float64(c1.switches-c0.switches)/n
	if bpid != pid {
		f.bridgeCPU, f.bridgeCS = float64(b1.ns-b0.ns)/1e3/n, float64(b1.switches-b0.switches)/n
	}
	for range o.total - o.warm - o.calls {
		if _, err := s.call(nameArgs); err != nil {
			return f, err
		}
	}
	f.after = readMem(pid)
	return f, nil
}

type cpuFig struct{ ns, switches int64 }

// readCPU is the time on CPU and the context switches of all the process's
// live threads. The time is schedstat's, in nanoseconds: /proc/PID/stat's
// utime+stime counts 10 ms ticks, a dozen or so over a few thousand cheap
// calls, so one tick more or less moved a figure by a tenth. A thread that
// exits during the run takes its time with it; the Go runtime and Node keep
// theirs.
func readCPU(pid int) cpuFig {
	var c cpuFig
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
	for _, t := range tasks {
		if b, err := os.ReadFile(t + "/schedstat"); err == nil {
			if f := strings.Fields(string(b)); len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				c.ns += n
			}
		}
		c.switches += statusField(t+"/status", "voluntary_ctxt_switches:") + statusField(t+"/status", "nonvoluntary_ctxt_switches:")
	}
	return c
}

func statusField(file, key string) int64 {
	b, _ := os.ReadFile(file)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, key); ok {
			n, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			return n
		}
	}
	return 0
}

// memFig is in KiB. uss (private pages) is what one more process of the
// same binary adds: a bridge's file pages are shared with the agent's and
// every other session's.
type memFig struct{ rss, pss, uss int64 }

func readMem(pid int) memFig {
	file := fmt.Sprintf("/proc/%d/smaps_rollup", pid)
	return memFig{statusField(file, "Rss:"), statusField(file, "Pss:"), statusField(file, "Private_Clean:") + statusField(file, "Private_Dirty:")}
}

type ioFig struct{ writeBytes, wchar int64 }

func readIO(pid int) ioFig {
	file := fmt.Sprintf("/proc/%d/io", pid)
	return ioFig{statusField(file, "write_bytes:"), statusField(file, "wchar:")}
}

// healthCost is the CPU time (µs) and allocations of one live health
// snapshot, in this process, with the CPU window already held so no
// reading waits.
func healthCost(n int) (float64, float64) {
	now := time.Now()
	l := sysinfo.NewLinux(sysinfo.LinuxOptions{Now: func() time.Time { now = now.Add(time.Second); return now }})
	ctx := context.Background()
	_, _ = l.Health(ctx)
	var m0, m1 runtimeMem
	m0.read()
	t0 := selfCPU()
	for range n {
		_, _ = l.Health(ctx)
	}
	t1 := selfCPU()
	m1.read()
	return float64(t1-t0) / 1e3 / float64(n), float64(m1.mallocs-m0.mallocs) / float64(n)
}

// psutilScript reads what the health snapshot reads: CPU times, memory,
// swap, load, uptime, the root file system, temperature and frequency.
const psutilScript = `
import os, sys, time, psutil
n = int(sys.argv[1])
def once():
    psutil.cpu_percent(interval=None)
    psutil.virtual_memory()
    psutil.swap_memory()
    os.getloadavg()
    psutil.boot_time()
    psutil.disk_usage("/")
    psutil.sensors_temperatures()
    psutil.cpu_freq()
once()
t0 = time.process_time()
for _ in range(n):
    once()
print((time.process_time() - t0) / n * 1e6)
`

func psutilCost(python string, n int) (float64, error) {
	out, err := exec.Command(python, "-c", psutilScript, strconv.Itoa(n)).Output()
	if err != nil {
		return 0, err
	}
	return strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
}

func selfCPU() int64 { // ns
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// armSizes builds the armv6 agent and helper of the module in src.
func armSizes(dir, src, ldflags string) (agent, helper float64, err error) {
	out := filepath.Join(dir, "armv6")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", ldflags, "-o", out+"/", "./cmd/raspi-mcp", "./cmd/raspi-mcp-helper")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=arm", "GOARM=6", "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return 0, 0, fmt.Errorf("%w: %s", err, b)
	}
	size := func(name string) float64 {
		st, err := os.Stat(filepath.Join(out, name))
		if err != nil {
			return 0
		}
		return float64(st.Size()) / (1 << 20)
	}
	return size("raspi-mcp"), size("raspi-mcp-helper"), nil
}

// baselineAgentSize builds the armv6 agent of commit rev (its tree from git
// archive, so the checkout is untouched) with ldflags and GOFLAGS as set.
func baselineAgentSize(dir, rev, ldflags string) (float64, error) {
	src, tarball := filepath.Join(dir, "baseline"), filepath.Join(dir, "baseline.tar")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return 0, err
	}
	for _, args := range [][]string{{"git", "archive", "-o", tarball, rev}, {"tar", "-xf", tarball, "-C", src}} {
		if b, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			return 0, fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, b)
		}
	}
	agent, _, err := armSizes(filepath.Join(dir, "baseline-bin"), src, ldflags)
	return agent, err
}

// exampleFlush is the flush interval config.example.toml documents.
func exampleFlush() time.Duration {
	b, _ := os.ReadFile("config.example.toml")
	m := regexp.MustCompile(`(?m)^\s*#?\s*flush_interval\s*=\s*"([^"]+)"`).FindSubmatch(b)
	if m != nil {
		if d, err := time.ParseDuration(string(m[1])); err == nil {
			return d
		}
	}
	return time.Minute
}

func us(v float64) string {
	if v == 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f µs", v)
}

func f1(v float64) string { return fmt.Sprintf("%.1f", v) }

func mem(m memFig) string {
	if m.rss == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f / %.1f / %.1f MiB", float64(m.rss)/1024, float64(m.pss)/1024, float64(m.uss)/1024)
}

func ratio(a, b float64) string {
	if a == 0 || b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2fx", a/b)
}

func pct(a, b float64) string {
	if b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f%%", 100*a/b)
}

type runtimeMem struct{ mallocs uint64 }

func (m *runtimeMem) read() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.mallocs = ms.Mallocs
}
