package pairing

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"
)

// Usage is `raspi-mcp-laptop pair --help`.
const Usage = `raspi-mcp-laptop pair: store a pairing with a Pi and set up MCP clients for it

usage:
  raspi-mcp-laptop pair LINE [--name NAME] [--client C [--write] [--file FILE]] [--command PATH]
      store the line "sudo raspi-mcp pair ..." printed on the Pi and print the
      client entries that run: raspi-mcp-laptop connect paired NAME
  raspi-mcp-laptop pair list [--json]
      the pairings: name, address, fingerprint, role, expiry; never a token
  raspi-mcp-laptop pair remove NAME
      forget a pairing (revoke its token on the Pi: sudo raspi-mcp token revoke TOKEN)
  raspi-mcp-laptop pair snippet NAME [--client C] [--write] [--file FILE] [--command PATH]
      print a client's entry for the pairing again, or write it into its config

clients (--client): claude-desktop, claude-code, cursor, vscode, codex, gemini; --write
writes the entry into the config file of claude-desktop, cursor or vscode (the old file is
kept beside it as FILE.raspi-mcp-TIME.bak), the others print their own "mcp add" command.
A pairing is stored with its token in the user's config directory, readable by the user
alone; pairing the same name again replaces it (the Pi rotated the token).
`

// UsageError is a wrong command line: the caller prints it with the usage
// and exits 2.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return "pair: " + e.Msg }

// ErrHelp is returned after --help printed the usage: exit 0.
var ErrHelp = errors.New("pair: help printed")

// Command is `raspi-mcp-laptop pair ARGS...` (args after "pair"); out
// gets what the command prints, errOut its notes. The stdio server's path
// in client entries is this executable's unless --command names another.
func Command(args []string, out, errOut io.Writer) error {
	st, err := DefaultStore()
	if err != nil {
		return err
	}
	return command(args, out, errOut, st, time.Now())
}

func command(args []string, out, errOut io.Writer, st Store, now time.Time) error {
	if len(args) == 0 {
		return &UsageError{"give the pairing line, or list, remove or snippet"}
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(out, Usage)
		return ErrHelp
	case "list":
		return list(args[1:], out, st, now)
	case "remove":
		return remove(args[1:], out, st)
	case "snippet":
		return snippet(args[1:], out, errOut, st, now)
	}
	return add(args, out, errOut, st, now)
}

// flags are pair's and snippet's.
type flags struct {
	fs      *flag.FlagSet
	name    *string
	client  *string
	write   *bool
	file    *string
	command *string
	json    *bool
}

func newFlags(name string) *flags {
	fs := flag.NewFlagSet("pair "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return &flags{fs: fs}
}

func (f *flags) clientFlags() {
	f.client = f.fs.String("client", "", "the MCP client: "+strings.Join(ClientIDs(), ", ")+" (default: all, printed)")
	f.write = f.fs.Bool("write", false, "write the entry into the client's config file (claude-desktop, cursor, vscode)")
	f.file = f.fs.String("file", "", "with --write: this config file instead of the client's user-wide one")
	f.command = f.fs.String("command", "", "the path of raspi-mcp-laptop in the entries (default: this program's)")
}

// parse reads flags wherever they stand and returns the positional
// arguments.
func (f *flags) parse(args []string) ([]string, error) {
	var pos []string
	for {
		if err := f.fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, ErrHelp
			}
			return nil, &UsageError{err.Error()}
		}
		args = f.fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos, args = append(pos, args[0]), args[1:]
	}
}

func add(args []string, out, errOut io.Writer, st Store, now time.Time) error {
	f := newFlags("LINE")
	f.name = f.fs.String("name", "", "the name to connect by (default: the Pi's host name)")
	f.clientFlags()
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return &UsageError{"pair takes one pairing line (quote it if your shell split it)"}
	}
	if err := f.checkClient(); err != nil {
		return err
	}
	l, err := Decode(pos[0])
	if err != nil {
		return err
	}
	if !l.Expires.IsZero() && !now.Before(l.Expires) {
		return fmt.Errorf("pairing: the line's token expired at %s: print a new line on the Pi (sudo raspi-mcp pair %s --role %s)", l.Expires.UTC().Format(time.DateTime+" UTC"), l.TokenName, l.Role)
	}
	name := *f.name
	if name == "" {
		name = NameFor(l.URL)
	}
	if err := CheckName(name); err != nil {
		return &UsageError{"--name: " + err.Error()}
	}
	p := Pair{Name: name, TokenName: l.TokenName, URL: l.URL, Fingerprint: l.Fingerprint, Token: l.Token,
		Role: l.Role, Profile: l.Profile, Expires: l.Expires, Paired: now.UTC().Truncate(time.Second)}
	replaced, err := st.Save(p)
	if err != nil {
		return err
	}
	verb := "paired"
	if replaced {
		verb = "paired again (the old pairing is replaced)"
	}
	fmt.Fprintf(out, "%s %q: %s as token:%s (%s), certificate %s\n", verb, name, l.URL, l.TokenName, describe(p), l.Fingerprint)
	fmt.Fprintf(out, "stored in %s, readable by you alone; the token is not shown again\n\n", st.path(name))
	return f.emit(out, errOut, name, now)
}

func snippet(args []string, out, errOut io.Writer, st Store, now time.Time) error {
	f := newFlags("snippet")
	f.clientFlags()
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return &UsageError{"pair snippet takes one NAME (pair list shows them)"}
	}
	if err := f.checkClient(); err != nil {
		return err
	}
	if _, err := st.Get(pos[0]); err != nil {
		return err
	}
	return f.emit(out, errOut, pos[0], now)
}

// checkClient refuses --write and --file without the one client they are
// for, before anything is stored.
func (f *flags) checkClient() error {
	if *f.client != "" {
		c, err := LookupClient(*f.client)
		if err != nil {
			return &UsageError{"--client: " + err.Error()}
		}
		if *f.write && !c.Writable() {
			return &UsageError{fmt.Sprintf("--write: %s's config is not written here (run the command pair prints for it)", c.Title)}
		}
	}
	if (*f.write || *f.file != "") && *f.client == "" {
		return &UsageError{"--write and --file need --client claude-desktop, cursor or vscode"}
	}
	if *f.file != "" && !*f.write {
		return &UsageError{"--file goes with --write"}
	}
	return nil
}

// emit prints the client entries of pairing name, or writes one.
func (f *flags) emit(out, errOut io.Writer, name string, now time.Time) error {
	exe := *f.command
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return fmt.Errorf("pairing: the path of this program: %w (give it with --command PATH)", err)
		}
	}
	if *f.client == "" {
		for _, c := range clients {
			fmt.Fprintf(out, "%s:\n%s\n", c.Title, c.Snippet(name, exe))
		}
		fmt.Fprintln(out, "to write one into its config file: raspi-mcp-laptop pair snippet", name, "--client claude-desktop|cursor|vscode --write")
		return nil
	}
	c, _ := LookupClient(*f.client)
	if !*f.write {
		fmt.Fprintf(out, "%s:\n%s", c.Title, c.Snippet(name, exe))
		return nil
	}
	path := *f.file
	if path == "" {
		var err error
		if path, err = c.ConfigPath(); err != nil {
			return err
		}
	}
	backup, replaced, err := c.WriteConfig(path, name, exe, now)
	if err != nil {
		return err
	}
	switch {
	case backup == "" && replaced:
		fmt.Fprintf(out, "%s already has the entry %q in %s\n", c.Title, name, path)
	case replaced:
		fmt.Fprintf(out, "replaced the entry %q in %s (the old file is %s)\n", name, path, backup)
	case backup != "":
		fmt.Fprintf(out, "added the entry %q to %s (the old file is %s)\n", name, path, backup)
	default:
		fmt.Fprintf(out, "wrote %s with the entry %q\n", path, name)
	}
	fmt.Fprintf(errOut, "restart %s (or reload its MCP servers) to connect\n", c.Title)
	return nil
}

// describe is a pairing's role, profile and expiry, as pair and list
// show them.
func describe(p Pair) string {
	prof := p.Profile
	if prof == "" {
		prof = "all"
	}
	return fmt.Sprintf("role %s, profile %s, expires %s", p.Role, prof, expiry(p))
}

func expiry(p Pair) string {
	if p.Expires.IsZero() {
		return "never"
	}
	return p.Expires.UTC().Format(time.DateTime + " UTC")
}

// listJSON is one pairing of `pair list --json`: never the token.
type listJSON struct {
	Name        string     `json:"name"`
	URL         string     `json:"url"`
	Fingerprint string     `json:"fingerprint"`
	TokenName   string     `json:"token_name"`
	Role        string     `json:"role"`
	Profile     string     `json:"profile"`
	Expires     *time.Time `json:"expires"` // null: never
	Expired     bool       `json:"expired"`
	Paired      time.Time  `json:"paired"`
}

func list(args []string, out io.Writer, st Store, now time.Time) error {
	f := newFlags("list")
	f.json = f.fs.Bool("json", false, "print JSON")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return &UsageError{"pair list takes no arguments"}
	}
	pairs, lerr := st.List()
	if *f.json {
		rows := make([]listJSON, len(pairs))
		for i, p := range pairs {
			prof := p.Profile
			if prof == "" {
				prof = "all"
			}
			rows[i] = listJSON{Name: p.Name, URL: p.URL, Fingerprint: p.Fingerprint, TokenName: p.TokenName, Role: p.Role,
				Profile: prof, Expired: p.Expired(now), Paired: p.Paired}
			if !p.Expires.IsZero() {
				rows[i].Expires = &pairs[i].Expires
			}
		}
		b, _ := json.MarshalIndent(rows, "", "  ")
		fmt.Fprintln(out, string(b))
		return lerr
	}
	if len(pairs) == 0 && lerr == nil {
		fmt.Fprintf(out, "no pairings in %s (on the Pi: sudo raspi-mcp pair NAME --role operate; here: raspi-mcp-laptop pair LINE)\n", st.Dir)
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tADDRESS\tTOKEN\tROLE\tEXPIRES\tFINGERPRINT")
	for _, p := range pairs {
		exp := expiry(p)
		if p.Expired(now) {
			exp += " (expired)"
		}
		prof := ""
		if p.Profile != "" {
			prof = "/" + p.Profile
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s%s\t%s\t%s\n", p.Name, p.URL, p.TokenName, p.Role, prof, exp, p.Fingerprint)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return lerr
}

func remove(args []string, out io.Writer, st Store) error {
	f := newFlags("remove")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return &UsageError{"pair remove takes one NAME (pair list shows them)"}
	}
	p, gerr := st.Get(pos[0])
	if err := st.Remove(pos[0]); err != nil {
		return err
	}
	revoke := "sudo raspi-mcp token list shows its token; sudo raspi-mcp token revoke NAME"
	if gerr == nil {
		revoke = "sudo raspi-mcp token revoke " + p.TokenName
	}
	fmt.Fprintf(out, "pairing %q removed; its token still works on the Pi until you revoke it there: %s\n", pos[0], revoke)
	return nil
}
