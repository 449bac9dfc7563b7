package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/internal/bearer"
)

// tokenGroup is the group the packaged agent runs in: a new token file is
// given to it, so the agent can read the file it may never write.
const tokenGroup = "raspi-mcp"

var tokenLines = []string{
	"raspi-mcp token create NAME --role read|operate|admin|metrics [--profile P] [--expires 90d] [--config FILE | --dir DIR]",
	"raspi-mcp token list [--json] [--config FILE | --dir DIR]",
	"raspi-mcp token revoke NAME [--config FILE | --dir DIR]",
}

// cmdToken is `raspi-mcp token ...`: the HTTP endpoint's bearer tokens,
// made and revoked here on the device (as root, who alone may write the
// file) and never over MCP, so no client can give itself a token.
func cmdToken(args []string) error {
	return runToken(args, os.Stdout, os.Stderr)
}

func runToken(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "create" && args[0] != "list" && args[0] != "revoke") {
		sub := ""
		if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
			sub, args = args[0], args[1:]
		}
		return groupUsage("token", "bearer tokens of the HTTP endpoint, each with a name and a role", sub, args, tokenLines...)
	}
	switch args[0] {
	case "create":
		return tokenCreate(args[1:], stdout, stderr)
	case "list":
		return tokenList(args[1:], stdout)
	default:
		return tokenRevoke(args[1:], stdout)
	}
}

// tokenFileFlags adds --config and --dir to c and returns what finds the
// token file once c is parsed, and the configuration that names it.
// Without either it finds the agent as every client command does (where):
// the Pi's when its socket is there, else the laptop-mode agent of
// `raspi-mcp serve --sim` in its well-known directory.
func tokenFileFlags(c *command) func() (*bearer.File, config.Config, error) {
	cfgPath := c.fs.String("config", config.DefaultPath, "configuration `FILE` naming the token file ([http] tokens)")
	dir := c.fs.String("dir", "", "the `DIR` of a laptop-mode agent (serve --sim --dir DIR): its token file (default: the Pi's, else "+simDir("")+"'s)")
	return func() (*bearer.File, config.Config, error) {
		if *dir != "" {
			if flagSet(c.fs, "config") {
				return nil, config.Config{}, c.wrongArgs("--dir and --config name the token file twice: give one")
			}
			return tokenFile(filepath.Join(*dir, "config.toml"), true, true)
		}
		if !flagSet(c.fs, "config") {
			w := where{cfg: *cfgPath}
			if d, ok := w.laptop(); ok {
				return tokenFile(filepath.Join(d, "config.toml"), true, true)
			}
		}
		return tokenFile(*cfgPath, flagSet(c.fs, "config"), false)
	}
}

// tokenFile is the token file the configuration names. Without a config
// file at the default path the default applies; a named config (--config,
// or a laptop-mode agent's) that does not load is an error, never silently
// another file. A laptop-mode agent runs as its user, who owns the file:
// it is never given to the packaged agent's group.
func tokenFile(cfgPath string, named, laptop bool) (*bearer.File, config.Config, error) {
	cfg, err := config.Load(cfgPath)
	if errors.Is(err, fs.ErrNotExist) && !named {
		cfg, err = config.Default(), nil
	}
	if err != nil {
		return nil, config.Config{}, err
	}
	if cfg.HTTP.Tokens == "" {
		return nil, config.Config{}, fmt.Errorf("%s: [http] tokens is empty: set the token file's path", cfgPath)
	}
	f := &bearer.File{Path: cfg.HTTP.Tokens}
	if _, err := user.LookupGroup(tokenGroup); err == nil && !laptop {
		f.Group = tokenGroup // the package made it; without it the agent runs as the file's owner
	}
	return f, cfg, nil
}

// asRoot adds the way out of a permission error: the file is root's.
func asRoot(err error) error {
	if errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("%w (the token file is root's: run it with sudo)", err)
	}
	return err
}

func tokenCreate(args []string, stdout, stderr io.Writer) error {
	c := newCommand("token create", "NAME --role read|operate|admin|metrics [--profile P] [--expires 90d] [--config FILE | --dir DIR]",
		"make a bearer token for the HTTP endpoint and print its secret, once")
	tokens := tokenFileFlags(c)
	role := c.fs.String("role", "", "the token's `ROLE`: read, operate, admin (as in [roles]) or metrics (only /metrics)")
	profile := c.fs.String("profile", "", "narrow the role to `PROFILE`: read-only, or a [profiles] name of the config (default: all, no narrowing)")
	expires := c.fs.String("expires", "none", "lifetime `TTL`: 30m, 12h, 90d, 8w, or none")
	pos, err := c.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return c.wrongArgs("token create takes one NAME")
	}
	if *role == "" {
		return c.wrongArgs("token create needs --role (read, operate, admin or metrics)")
	}
	ttl, f, _, prof, err := newTokenArgs(tokens, *expires, *profile)
	if err != nil {
		return err
	}
	secret, tok, err := f.CreateProfile(pos[0], *role, prof, ttl, time.Now())
	if err != nil {
		return asRoot(err)
	}
	// The secret alone on stdout, so SECRET=$(raspi-mcp token create ...) works.
	fmt.Fprintf(stderr, "token %q (role %s, profile %s, expires %s) is in %s; its secret, shown only now:\n", tok.Name, tok.Role, profileOf(tok), expiryUTC(tok), f.Path)
	fmt.Fprintln(stdout, secret)
	fmt.Fprintln(stderr, "clients send it as the HTTP header \"Authorization: Bearer <secret>\"; revoke it with: raspi-mcp token revoke", tok.Name)
	return nil
}

// tokenJSON is one token of `token list --json`.
type tokenJSON struct {
	Name    string     `json:"name"`
	Role    string     `json:"role"`
	Profile string     `json:"profile"` // "all": no narrowing
	Created time.Time  `json:"created"`
	Expires *time.Time `json:"expires"` // null: never
	Expired bool       `json:"expired"`
}

func tokenList(args []string, stdout io.Writer) error {
	c := newCommand("token list", "[--json] [--config FILE | --dir DIR]", "the bearer tokens: name, role, profile, created, expires; never a secret")
	tokens := tokenFileFlags(c)
	asJSON := c.fs.Bool("json", false, "print JSON")
	pos, err := c.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return c.wrongArgs("token list takes no arguments")
	}
	f, _, err := tokens()
	if err != nil {
		return err
	}
	toks, err := f.List()
	if err != nil {
		return asRoot(err)
	}
	now := time.Now()
	if *asJSON {
		out := make([]tokenJSON, len(toks))
		for i, t := range toks {
			out[i] = tokenJSON{Name: t.Name, Role: t.Role, Profile: profileOf(t), Created: t.Created, Expired: t.Expired(now)}
			if !t.Expires.IsZero() {
				out[i].Expires = &toks[i].Expires
			}
		}
		b, _ := json.MarshalIndent(out, "", "  ")
		fmt.Fprintln(stdout, string(b))
		return nil
	}
	if len(toks) == 0 {
		fmt.Fprintf(stdout, "no tokens in %s (make one with: raspi-mcp token create NAME --role read)\n", f.Path)
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tROLE\tPROFILE\tCREATED (UTC)\tEXPIRES (UTC)\tEXPIRED")
	for _, t := range toks {
		exp := "no"
		if t.Expired(now) {
			exp = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", t.Name, t.Role, profileOf(t), t.Created.UTC().Format(time.DateTime), expiry(t), exp)
	}
	return tw.Flush()
}

func tokenRevoke(args []string, stdout io.Writer) error {
	c := newCommand("token revoke", "NAME [--config FILE | --dir DIR]", "delete a bearer token: its next request is refused")
	tokens := tokenFileFlags(c)
	pos, err := c.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return c.wrongArgs("token revoke takes one NAME")
	}
	f, _, err := tokens()
	if err != nil {
		return err
	}
	if err := f.Revoke(pos[0]); err != nil {
		return asRoot(err)
	}
	fmt.Fprintf(stdout, "token %q revoked: its next request is refused\n", pos[0])
	return nil
}

// profileOf is a token's profile as the CLI shows it: "all" for none.
func profileOf(t bearer.Token) string {
	if t.Profile == "" {
		return config.ProfileAll
	}
	return t.Profile
}

// expiry is when a token expires, as the list shows it.
func expiry(t bearer.Token) string {
	if t.Expires.IsZero() {
		return "never"
	}
	return t.Expires.UTC().Format(time.DateTime)
}

func expiryUTC(t bearer.Token) string {
	if t.Expires.IsZero() {
		return "never"
	}
	return expiry(t) + " UTC"
}

// newTokenArgs reads what making a token needs (token create, pair): its
// lifetime, the token file and the config in force, and its profile, ""
// for all. The agent refuses every call of a token whose profile its
// config does not define: refuse to make one here, where the owner can
// fix it.
func newTokenArgs(tokens func() (*bearer.File, config.Config, error), expires, profile string) (ttl time.Duration, f *bearer.File, cfg config.Config, prof string, err error) {
	if ttl, err = bearer.ParseTTL(expires); err != nil {
		return 0, nil, cfg, "", err
	}
	if f, cfg, err = tokens(); err != nil {
		return 0, nil, cfg, "", err
	}
	if profile != "" && profile != config.ProfileAll {
		if err := cfg.CheckProfile(profile); err != nil {
			return 0, nil, cfg, "", fmt.Errorf("--profile: %w", err)
		}
		prof = profile
	}
	return ttl, f, cfg, prof, nil
}
