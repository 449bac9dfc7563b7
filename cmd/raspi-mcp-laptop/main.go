// Command raspi-mcp-laptop is the local stdio MCP server an MCP client on a
// laptop (macOS, Windows, Linux) starts to reach a Raspberry Pi's raspi-mcp:
// over SSH with the system's ssh client, or over HTTPS with the Pi's
// certificate pinned by fingerprint and a bearer token. When the Pi cannot
// be reached it answers the client itself with the reason and the fix. See
// docs/laptop.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"

	"github.com/raspi-mcp/raspi-mcp/internal/fallback"
	"github.com/raspi-mcp/raspi-mcp/laptop"
	"github.com/raspi-mcp/raspi-mcp/pairing"
)

// version and commit are set at link time (-X main.version=... -X main.commit=...).
var (
	version = "0.1.0-dev"
	commit  = "unknown"
)

const usage = `raspi-mcp-laptop: the laptop side of raspi-mcp, an MCP server on stdin/stdout for your MCP client.

usage:
  raspi-mcp-laptop connect ssh HOST [--command "/usr/bin/raspi-mcp stdio"] [--no-master]
  raspi-mcp-laptop connect https URL --fingerprint sha256:HEX (--token-file FILE | --token-env VAR)
  raspi-mcp-laptop connect paired NAME
  raspi-mcp-laptop connect HOST | paired:NAME     (one argument, as the desktop bundle passes it)
  raspi-mcp-laptop pair LINE [--name NAME] [--client ID [--write]]
  raspi-mcp-laptop pair list | remove NAME | snippet NAME --client ID [--write]
  raspi-mcp-laptop version
  raspi-mcp-laptop help

connect ssh runs ssh -T HOST COMMAND with your ssh configuration (keys, agent, ~/.ssh/config).
connect https reaches the Pi's [http] endpoint; only the certificate with that fingerprint
(from raspi-mcp status on the Pi, or openssl's AB:CD:... form) is accepted.
connect paired uses what pair stored from the line "sudo raspi-mcp pair NAME --role ROLE" printed on the Pi:
its address, pinned fingerprint and token.
If the Pi cannot be reached, the client is told why and what to do, as a tool named raspi_mcp_unavailable.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run is the command line: 0 on success, 1 when the Pi was not reached
// (the client was told why), 2 for a usage error.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "version", "--version", "-version":
		fmt.Fprintf(stdout, "raspi-mcp-laptop %s (%s) %s/%s\n", version, commit, runtime.GOOS, runtime.GOARCH)
		return 0
	case "help", "--help", "-help", "-h":
		fmt.Fprint(stdout, usage)
		return 0
	case "pair":
		err := pairing.Command(args[1:], stdout, stderr)
		var ue *pairing.UsageError
		switch {
		case err == nil, errors.Is(err, pairing.ErrHelp):
			return 0
		case errors.As(err, &ue):
			fmt.Fprintf(stderr, "raspi-mcp-laptop: %v\n", err)
			return 2
		}
		fmt.Fprintf(stderr, "raspi-mcp-laptop: %v\n", err)
		return 1
	case "connect":
	default:
		fmt.Fprintf(stderr, "raspi-mcp-laptop: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	if len(args) < 2 {
		fmt.Fprintf(stderr, "raspi-mcp-laptop: connect needs ssh, https or paired\n\n%s", usage)
		return 2
	}
	var err error
	switch args[1] {
	case "ssh":
		err = connectSSH(ctx, args[2:], stdin, stdout, stderr)
	case "https":
		err = connectHTTPS(ctx, args[2:], stdin, stdout, stderr)
	case "paired":
		err = connectPaired(ctx, args[2:], stdin, stdout, stderr)
	default:
		// One argument, as the desktop bundle's user_config gives it:
		// paired:NAME, or an SSH host.
		if name, ok := strings.CutPrefix(args[1], "paired:"); ok {
			err = connectPaired(ctx, append([]string{name}, args[2:]...), stdin, stdout, stderr)
		} else {
			err = connectSSH(ctx, args[1:], stdin, stdout, stderr)
		}
	}
	var usageErr *usageError
	var failed *laptop.Failed
	switch {
	case err == nil:
		return 0
	case errors.As(err, &usageErr):
		// An MCP client shows neither the exit nor stderr: its person
		// learns what is wrong with the server's arguments from the
		// fallback, like any other reason it cannot connect.
		d := fallback.Down{Reason: "raspi-mcp-laptop's arguments are wrong: " + usageErr.err.Error(),
			FixHint: "correct the server's arguments in the MCP client's configuration; see raspi-mcp-laptop help", Version: version, Where: laptop.Where}
		fmt.Fprintf(stderr, "raspi-mcp-laptop: %v\n\n%s", usageErr.err, usage)
		if stdinIsClient(stdin) {
			_ = fallback.Serve(stdin, stdout, d)
		}
		return 2
	case errors.As(err, &failed):
		return 1 // the reason is on stderr and went to the client
	}
	fmt.Fprintf(stderr, "raspi-mcp-laptop: %v\n", err)
	return 1
}

// stdinIsClient says whether stdin is something other than a terminal: a
// client that is owed an answer, not a person who reads stderr.
func stdinIsClient(stdin io.Reader) bool {
	f, ok := stdin.(*os.File)
	if !ok {
		return true
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice == 0
}

type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }

// parse reads flags wherever they stand: an MCP client's config lists the
// arguments in whatever order its author wrote them.
func parse(fs *flag.FlagSet, args []string, positional int) ([]string, error) {
	fs.SetOutput(io.Discard)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, &usageError{err}
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	if len(pos) != positional {
		return nil, &usageError{fmt.Errorf("%s takes %d argument(s), got %q", fs.Name(), positional, pos)}
	}
	return pos, nil
}

func connectSSH(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("connect ssh", flag.ContinueOnError)
	command := fs.String("command", laptop.DefaultCommand, "the command on the Pi")
	noMaster := fs.Bool("no-master", false, "do not share one SSH connection between sessions")
	pos, err := parse(fs, args, 1)
	if err != nil {
		return err
	}
	env := laptop.SSHEnv(os.Environ(), runtime.GOOS, laptop.ProfileDir())
	s := laptop.SSH{Host: pos[0], Command: *command, Master: !*noMaster, Env: env, Version: version}
	if err := s.Check(); err != nil {
		return &usageError{err}
	}
	s.SSHPath, err = laptop.FindSSH(runtime.GOOS, env, exec.LookPath, func(p string) bool {
		fi, err := os.Stat(p)
		return err == nil && !fi.IsDir()
	})
	if err != nil {
		s.SSHPath = "ssh" // Run's start fails and tells the client to install it
	}
	if s.Master {
		if cache, err := os.UserCacheDir(); err == nil {
			if dir := laptop.ControlDir(cache); dir != "" && os.MkdirAll(dir, 0o700) == nil {
				s.ControlDir = dir
			}
		}
	}
	return s.Run(ctx, stdin, stdout, stderr)
}

func connectHTTPS(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("connect https", flag.ContinueOnError)
	fingerprint := fs.String("fingerprint", "", "the Pi's certificate fingerprint (sha256:HEX)")
	tokenFile := fs.String("token-file", "", "a file whose first line is the token")
	tokenEnv := fs.String("token-env", "", "an environment variable holding the token")
	pos, err := parse(fs, args, 1)
	if err != nil {
		return err
	}
	r := laptop.Remote{URL: pos[0], Fingerprint: *fingerprint, Version: version}
	switch {
	case (*tokenFile == "") == (*tokenEnv == ""):
		return &usageError{errors.New("connect https needs one of --token-file FILE or --token-env VAR")}
	case *tokenFile != "":
		if r.Token, err = laptop.ReadToken(*tokenFile); err != nil {
			return &usageError{err}
		}
	default:
		r.Token = strings.TrimSpace(os.Getenv(*tokenEnv))
		if r.Token == "" {
			return &usageError{fmt.Errorf("the environment variable %s is not set", *tokenEnv)}
		}
	}
	if err := r.Check(); err != nil {
		return &usageError{err}
	}
	return r.Run(ctx, stdin, stdout, stderr)
}

// connectPaired reaches the Pi a pairing stored: its address, its pinned
// certificate and its token; a refused token reads as a pairing to redo.
func connectPaired(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("connect paired", flag.ContinueOnError)
	pos, err := parse(fs, args, 1)
	if err != nil {
		return err
	}
	st, err := pairing.DefaultStore()
	if err != nil {
		return &usageError{err}
	}
	p, err := st.Get(pos[0])
	if err != nil {
		return &usageError{fmt.Errorf("%w (pair it first: on the Pi `sudo raspi-mcp pair NAME --role operate`, here `raspi-mcp-laptop pair LINE`)", err)}
	}
	r := laptop.Remote{URL: p.URL, Fingerprint: p.Fingerprint, Token: p.Token, Version: version, Explain: pairing.ExplainRefusal}
	if err := r.Check(); err != nil {
		return &usageError{err}
	}
	return r.Run(ctx, stdin, stdout, stderr)
}
