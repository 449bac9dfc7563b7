package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/agent"
	"github.com/raspi-mcp/raspi-mcp/agent/store"
	"github.com/raspi-mcp/raspi-mcp/bridge"
	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/internal/fallback"
	"github.com/raspi-mcp/raspi-mcp/privhelper/witness"
)

// where is how a client command finds the agent: --socket, else --dir's
// laptop-mode socket, else the config file's (the Pi's), else, when that
// socket is absent, the laptop-mode agent of `raspi-mcp serve --sim` in its
// well-known directory: on a laptop no flag is needed.
type where struct {
	dir, socket, cfg, db string
}

func (w *where) flags(fs *flag.FlagSet) {
	fs.StringVar(&w.dir, "dir", "", "the `DIR` of a laptop-mode agent started with serve --sim --dir DIR (default: the Pi's agent, else "+simDir("")+")")
	fs.StringVar(&w.socket, "socket", "", "agent socket `FILE` (overrides --dir and the config)")
	fs.StringVar(&w.cfg, "config", config.DefaultPath, "configuration `FILE` to read the socket and state paths from")
}

// laptop reports whether the command talks to a laptop-mode agent, and its directory.
func (w *where) laptop() (string, bool) {
	if w.socket != "" {
		return "", false
	}
	if w.dir != "" {
		return w.dir, true
	}
	if _, err := os.Stat(w.fileConfig().Agent.Socket); err == nil {
		return "", false
	}
	d := simDir("")
	if _, err := os.Stat(filepath.Join(d, "config.toml")); err == nil {
		return d, true
	}
	return "", false
}

// fileConfig is the config file's settings (the Pi's), or the defaults.
func (w *where) fileConfig() config.Config {
	if c, err := config.Load(w.cfg); err == nil {
		return c
	}
	return config.Default()
}

func (w *where) config() config.Config {
	if dir, ok := w.laptop(); ok {
		if c, err := config.Load(filepath.Join(dir, "config.toml")); err == nil {
			return c
		}
		return config.Laptop(dir, "")
	}
	return w.fileConfig()
}

func (w *where) agentSocket() string {
	if w.socket != "" {
		return w.socket
	}
	return w.config().Agent.Socket
}

// dial connects to the agent, or says why not and what to do about it.
func (w *where) dial() (*net.UnixConn, error) {
	conn, reason, hint := w.dialOrWhy()
	if conn != nil {
		return conn, nil
	}
	return nil, &exitError{code: 1, msg: fmt.Sprintf("%s.\n  %s", reason, hint)}
}

// dialOrWhy connects to the agent, or returns why it cannot (reason) and
// what to do about it (hint): the CLI prints them, and `raspi-mcp stdio`
// hands them to the MCP client.
func (w *where) dialOrWhy() (conn *net.UnixConn, reason, hint string) {
	socket := w.agentSocket()
	conn, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: socket, Net: "unix"})
	if err == nil {
		return conn, "", ""
	}
	dir, laptop := w.laptop()
	_, statErr := os.Stat(socket)
	switch {
	case errors.Is(err, os.ErrPermission):
		hint = fmt.Sprintf("you may not connect to %s: members of group raspi-mcp may (sudo usermod -aG raspi-mcp $USER, then log in again)", socket)
	case laptop && w.dir == "" && dir == simDir(""):
		hint = fmt.Sprintf("the laptop-mode agent of %s is not running any more; start it again: raspi-mcp serve --sim", dir)
	case laptop:
		hint = fmt.Sprintf("no laptop-mode agent is running in %s; start one: raspi-mcp serve --sim --dir %s", dir, dir)
	case w.socket != "":
		hint = fmt.Sprintf("nothing answers on %s", socket)
	case statErr == nil:
		hint = "its socket exists but nobody answers: sudo systemctl restart raspi-mcp; journalctl -u raspi-mcp says why it stopped"
	default:
		hint = "on a Pi: sudo systemctl start raspi-mcp; on a laptop: raspi-mcp serve --sim (then every command finds it)"
	}
	return nil, fmt.Sprintf("the agent is not running (%s: %v)", socket, unwrapSyscall(err)), hint
}

// unwrapSyscall is the errno of a dial error, without the "dial unix" prefix.
func unwrapSyscall(err error) error {
	var se *os.SyscallError
	if errors.As(err, &se) {
		return se.Err
	}
	return err
}

func (w *where) stateFile() string {
	if w.db != "" {
		return w.db
	}
	return w.config().Agent.State
}

func cmdStdio(args []string) error {
	c := newCommand("stdio", "[--dir DIR] [--socket FILE]", "MCP over stdin/stdout for an MCP client, e.g. ssh -T pi raspi-mcp stdio")
	var w where
	w.flags(c.fs)
	pos, err := c.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return c.wrongArgs("stdio takes no arguments")
	}
	conn, reason, hint := w.dialOrWhy()
	if conn == nil {
		// The client shows neither our exit nor our stderr: it learns why
		// from an MCP server that can only say so. stderr still tells a
		// person who runs stdio by hand.
		fmt.Fprintf(os.Stderr, "raspi-mcp: %s.\n  %s\n", reason, hint)
		if err := fallback.Serve(os.Stdin, os.Stdout, fallback.Down{Reason: reason, FixHint: hint, Version: version}); err != nil {
			return err
		}
		return &exitError{code: 1} // the reason is on stderr already
	}
	defer conn.Close()
	execBridge(conn) // returns only when raspi-mcp-stdio is not installed
	return bridge.Session(os.Stdin, os.Stdout, conn)
}

// session opens an MCP client session to the agent with the Go SDK.
func session(ctx context.Context, w *where) (*mcp.ClientSession, error) {
	conn, err := w.dial()
	if err != nil {
		return nil, err
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "raspi-mcp-cli", Version: version}, nil)
	s, err := c.Connect(ctx, &mcp.IOTransport{Reader: conn, Writer: conn}, nil)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("connecting to the agent: %w", err)
	}
	return s, nil
}

// callTool calls a tool and decodes its structured content into out.
func callTool(ctx context.Context, s *mcp.ClientSession, name string, args any, out any) (*mcp.CallToolResult, error) {
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return nil, err
	}
	if res.IsError {
		return res, errors.New(textOf(res))
	}
	if out != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return res, err
		}
		if err := json.Unmarshal(b, out); err != nil {
			return res, err
		}
	}
	return res, nil
}

func textOf(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func cmdAudit(args []string) error {
	sub := ""
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		sub, args = args[0], args[1:]
	}
	var c *command
	switch sub {
	case "verify":
		c = newCommand("audit verify", "[--dir DIR] [--db FILE] [--json]", "check the audit trail's hash chain; exit 1 if a record was edited or deleted")
	case "tail":
		c = newCommand("audit tail", "[--dir DIR] [--db FILE] [-n N] [--json]", "the newest audit records, oldest first")
	default:
		return groupUsage("audit", "check or show the audit trail", sub, args,
			"raspi-mcp audit verify [--dir DIR] [--db FILE] [--json]", "raspi-mcp audit tail [--dir DIR] [--db FILE] [-n N] [--json]")
	}
	var w where
	w.flags(c.fs)
	c.fs.StringVar(&w.db, "db", "", "state database `FILE` (default: from the config or --dir)")
	n := 20
	if sub == "tail" {
		c.fs.IntVar(&n, "n", 20, "how many records")
	}
	asJSON := c.fs.Bool("json", false, "machine-readable output")
	pos, err := c.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return c.wrongArgs("audit " + sub + " takes no arguments")
	}
	args = []string{sub}

	// A running agent holds the database lock: then ask it over MCP.
	db, err := store.Open(w.stateFile(), store.Options{ReadOnly: true, Timeout: 200 * time.Millisecond})
	var (
		ver     agent.AuditVerifyOut
		entries []agent.AuditEntry
	)
	switch {
	case err == nil:
		defer db.Close()
		if args[0] == "verify" {
			ver, err = agent.VerifyFile(db, witness.Path(w.config().Helper.StateDir))
		} else {
			entries, err = agent.TailFile(db, n)
		}
		if err != nil {
			return err
		}
	case errors.Is(err, store.ErrLocked):
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		s, err := session(ctx, &w)
		if err != nil {
			return err
		}
		defer s.Close()
		if args[0] == "verify" {
			_, err = callTool(ctx, s, "logs_verify_audit_chain", nil, &ver)
		} else {
			var page agent.AuditLogsOut
			_, err = callTool(ctx, s, "logs_get_recent_audit_logs", map[string]any{"limit": n}, &page)
			entries = page.Entries
		}
		if err != nil {
			return err
		}
	default:
		return err
	}
	if args[0] == "tail" {
		if *asJSON {
			b, _ := json.MarshalIndent(entries, "", "  ")
			fmt.Println(string(b))
			return nil
		}
		tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SEQ\tTIME\tPRINCIPAL\tROLE\tTOOL\tDECISION\tAPPROVED BY\tERROR\tREASON\tMESSAGE")
		for i := len(entries) - 1; i >= 0; i-- {
			e := entries[i]
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Seq, e.Time[:19], e.Principal, e.Role, e.Tool,
				decision(e.Decision, e.DryRun), approvedBy(e), orDash(e.ErrorCode), orDash(e.Reason), orDash(e.Message))
		}
		return tw.Flush()
	}
	if *asJSON {
		b, _ := json.MarshalIndent(ver, "", "  ")
		fmt.Println(string(b))
	} else if ver.OK {
		fmt.Printf("audit chain intact: %d records (seq %d..%d)%s\n", ver.Records, ver.FirstSeq, ver.LastSeq, witnessNote(ver.Witness))
	} else {
		fmt.Printf("AUDIT CHAIN BROKEN: %d records checked (seq %d..%d)%s\n", ver.Records, ver.FirstSeq, ver.LastSeq, witnessNote(ver.Witness))
		for _, p := range ver.Problems {
			fmt.Printf("  seq %d: %s: %s\n", p.Seq, p.Kind, p.Detail)
		}
	}
	if !ver.OK {
		return &exitError{code: 1}
	}
	return nil
}

// witnessNote says how the chain compares with the helper's witness.
func witnessNote(w *agent.AuditWitnessOut) string {
	switch {
	case w == nil:
		return ""
	case w.Error != "":
		return "; not compared with a witness: " + w.Error
	case w.Unwitnessed > 0:
		return fmt.Sprintf("; witnessed by the helper through seq %d, %d newer records not yet witnessed", w.Seq, w.Unwitnessed)
	}
	return fmt.Sprintf("; witnessed by the helper through seq %d", w.Seq)
}

// decision is an audit record's decision as a person reads it: a dry run,
// allowed or refused, is never mistaken for the real thing.
func decision(d string, dry bool) string {
	if !dry {
		return d
	}
	if d == "allow" {
		return "dry run"
	}
	return d + " (dry run)"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// groupUsage answers a command group (audit, config) called without one of
// its commands: help on stdout for --help, else usage on stderr and exit 2.
func groupUsage(group, summary, sub string, args []string, lines ...string) error {
	text := fmt.Sprintf("raspi-mcp %s: %s\n\nusage:\n  %s\n", group, summary, strings.Join(lines, "\n  "))
	if sub == "" && len(args) > 0 && (args[0] == "--help" || args[0] == "-h" || args[0] == "-help") {
		fmt.Print(text)
		return &exitError{code: 0}
	}
	fmt.Fprint(os.Stderr, text)
	if sub != "" {
		return &exitError{code: 2, msg: fmt.Sprintf("unknown %s command %q", group, sub)}
	}
	return &exitError{code: 2}
}

// approvedBy is an audit entry's approval channel, with how long the call
// waited for the device when it did.
func approvedBy(e agent.AuditEntry) string {
	if e.WaitedMS > 0 {
		return fmt.Sprintf("%s (%.1f s)", orDash(e.Channel), float64(e.WaitedMS)/1000)
	}
	return orDash(e.Channel)
}
