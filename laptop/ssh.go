package laptop

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/raspi-mcp/raspi-mcp/internal/fallback"
)

// DefaultCommand is what runs on the Pi: an absolute path, because a
// non-login SSH session's PATH is /usr/local/bin:/usr/bin:/bin at best.
const DefaultCommand = "/usr/bin/raspi-mcp stdio"

// SSH reaches the Pi with the system's ssh client: `ssh -T HOST COMMAND`,
// whose stdin and stdout carry MCP. The person's ssh configuration (keys,
// agent, ~/.ssh/config aliases, known_hosts) applies as it does in a
// terminal.
type SSH struct {
	Host    string // a host name, user@host, or an alias from ~/.ssh/config
	Command string // the command on the Pi; DefaultCommand when empty
	// Master shares one connection between sessions (ControlMaster=auto,
	// ControlPersist) where ssh supports it: not on Windows. ControlDir
	// holds the control sockets (0700); without one there is no master.
	Master     bool
	ControlDir string
	SSHPath    string   // the ssh binary (FindSSH)
	Env        []string // its environment (SSHEnv)
	Version    string   // ours, for the fallback's serverInfo
}

// controlPersist is how long an idle master connection stays: a client
// that restarts its server (a reload, a new chat) reconnects in ~20 ms
// instead of ~0.5 s.
const controlPersist = "10m"

// Check refuses a host or command that ssh would take for something else.
func (s SSH) Check() error {
	if s.Host == "" || strings.HasPrefix(s.Host, "-") || strings.ContainsAny(s.Host, " \t\r\n") {
		return fmt.Errorf("laptop: ssh host %q: want a host name, user@host or an ssh config alias", s.Host)
	}
	if strings.TrimSpace(s.Command) == "" && s.Command != "" {
		return fmt.Errorf("laptop: ssh command %q is blank", s.Command)
	}
	return nil
}

func (s SSH) command() string {
	if s.Command == "" {
		return DefaultCommand
	}
	return s.Command
}

// Args are ssh's arguments on goos. -T: a pty would echo every request
// back. BatchMode: nobody can answer a password or host-key prompt from
// inside an MCP client, so ssh fails at once with a reason instead of
// waiting on a terminal the client does not show.
func (s SSH) Args(goos string) []string {
	args := []string{"-T", "-o", "BatchMode=yes", "-o", "ConnectTimeout=20"}
	if s.Master && s.ControlDir != "" && goos != "windows" {
		args = append(args, "-o", "ControlMaster=auto", "-o", "ControlPath="+filepath.Join(s.ControlDir, "%C"),
			"-o", "ControlPersist="+controlPersist)
	}
	return append(args, "--", s.Host, s.command())
}

// ControlDir is where the control sockets go: the user's cache directory,
// or "" when its path is too long for a socket (104 bytes on macOS, with
// the 40 hex digits of %C).
func ControlDir(cache string) string {
	if cache == "" {
		return ""
	}
	dir := filepath.Join(cache, "raspi-mcp", "ssh")
	if len(dir)+1+40 >= 100 {
		return ""
	}
	return dir
}

// Run serves the client on stdin/stdout through ssh until either side
// ends. ssh starts when the client's first message is there; if ssh ends
// before the Pi answers a byte, the client gets the fallback with ssh's
// reason (Classify), and Run returns *Failed after the client closes its
// input. ssh's stderr passes through to stderr.
func (s SSH) Run(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer) error {
	if err := s.Check(); err != nil {
		return err
	}
	in := bufio.NewReaderSize(stdin, 64<<10)
	first, err := firstLine(in)
	if len(first) == 0 {
		return err // the client left without a word
	}
	replay := func() io.Reader { return io.MultiReader(bytes.NewReader(first), in) }

	cmd := exec.CommandContext(ctx, s.SSHPath, s.Args(runtime.GOOS)...)
	cmd.Env = s.Env
	sshIn, err := cmd.StdinPipe()
	if err != nil {
		return fmt.Errorf("laptop: ssh stdin: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("laptop: ssh stdout: %w", err)
	}
	// stderr is a pipe of our own, not an io.Writer for exec to copy:
	// with ControlPersist the master ssh forks into the background and
	// keeps stderr open, and exec's Wait would wait for it for 10 minutes.
	errR, errW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("laptop: ssh stderr: %w", err)
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	tail := &tailBuffer{done: make(chan struct{})}
	go tail.copy(errR, stderr)
	if err := cmd.Start(); err != nil {
		outW.Close()
		errW.Close()
		outR.Close()
		return serveDown(replay(), stdout, stderr, fallback.Down{
			Reason:  fmt.Sprintf("ssh cannot start (%v)", err),
			FixHint: "install the OpenSSH client (Windows: Settings > System > Optional features > OpenSSH Client)",
			Version: s.Version})
	}
	outW.Close()
	errW.Close()
	defer outR.Close()
	_, _ = sshIn.Write(first) // a write to an ssh that died is answered below

	buf := make([]byte, 32<<10)
	n, _ := outR.Read(buf)
	if n == 0 { // ssh closed stdout without a byte: it failed
		werr := cmd.Wait()
		tail.wait(2 * time.Second)
		code := -1
		var ee *exec.ExitError
		if errors.As(werr, &ee) {
			code = ee.ExitCode()
		}
		d := Classify(s.Host, s.command(), code, tail.String(), runtime.GOOS)
		d.Version = s.Version
		return serveDown(replay(), stdout, stderr, d)
	}
	if _, err := stdout.Write(buf[:n]); err != nil {
		_ = sshIn.Close()
		_ = cmd.Wait()
		return fmt.Errorf("laptop: stdout: %w", err)
	}
	go func() {
		_, _ = io.Copy(sshIn, in)
		_ = sshIn.Close() // the client is done: ssh sends EOF to the Pi
	}()
	_, cerr := io.Copy(stdout, outR)
	werr := cmd.Wait()
	if cerr != nil {
		return fmt.Errorf("laptop: stdout: %w", cerr)
	}
	if werr != nil {
		return fmt.Errorf("laptop: ssh %s: %w", s.Host, werr)
	}
	return nil
}

// firstLine is the client's first non-blank line, its newline included.
func firstLine(r *bufio.Reader) ([]byte, error) {
	for {
		line, err := r.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			if err == io.EOF {
				line = append(line, '\n')
			}
			return line, nil
		}
		if err != nil {
			if err == io.EOF {
				return nil, nil
			}
			return nil, fmt.Errorf("laptop: stdin: %w", err)
		}
	}
}

// Classify turns how ssh ended before the Pi's MCP server said anything
// (its exit code, -1 if unknown, and the end of its stderr) into the
// reason and the fix the client shows. The reason quotes ssh's own last
// line, which names what it tried.
func Classify(host, command string, code int, stderr, goos string) fallback.Down {
	last := lastLine(stderr)
	quote := func(what string) string {
		if last == "" {
			return what
		}
		return what + " (ssh: " + last + ")"
	}
	try := fmt.Sprintf("run `ssh %s true` in a terminal to see the same failure", host)
	low := strings.ToLower(stderr)
	has := func(words ...string) bool {
		for _, w := range words {
			if strings.Contains(low, strings.ToLower(w)) {
				return true
			}
		}
		return false
	}
	switch {
	case has("Host key verification failed", "REMOTE HOST IDENTIFICATION HAS CHANGED", "No ED25519 host key is known", "host key for"):
		return fallback.Down{Reason: quote("ssh does not know or no longer trusts the Pi's host key"),
			FixHint: fmt.Sprintf("connect once in a terminal and compare the key with the Pi's (`ssh %s`); if the Pi was reinstalled, first `ssh-keygen -R` its name", host)}
	case has("Permission denied", "Too many authentication failures", "no mutual signature"):
		return fallback.Down{Reason: quote("the Pi refused this laptop's SSH key"),
			FixHint: fmt.Sprintf("add this laptop's public key to the Pi (`ssh-copy-id %s`), or load a key the Pi accepts into ssh-agent; a key with a passphrase must be in the agent, as nobody can type it here; then %s", host, try)}
	case has("Could not resolve hostname", "Name or service not known", "nodename nor servname"):
		return fallback.Down{Reason: quote(fmt.Sprintf("the Pi's name %q does not resolve", host)),
			FixHint: "check the name (or the Host alias in ~/.ssh/config), or use the Pi's IP address; on a home network its name may be NAME.local"}
	case has("Connection refused"):
		return fallback.Down{Reason: quote("nothing accepts SSH connections at the Pi's address"),
			FixHint: "check that the Pi is on and its SSH server runs (`sudo systemctl enable --now ssh` on the Pi), and the port if it is not 22"}
	case has("timed out", "No route to host", "Network is unreachable", "Connection closed by", "Connection reset"):
		return fallback.Down{Reason: quote("the Pi cannot be reached"),
			FixHint: "check that the Pi is on and on a network this laptop reaches, then " + try}
	case code == 127 || has("command not found", "No such file or directory"):
		return fallback.Down{Reason: quote(fmt.Sprintf("the Pi has no %q", strings.Fields(command)[0])),
			FixHint: "install raspi-mcp on the Pi (its README's Install section), or pass --command with the path it has there"}
	case code == 255 && last == "" && goos == "windows":
		return fallback.Down{Reason: "ssh.exe exited with status 255 and said nothing, which it does when its environment lacks what Windows sets for a login",
			FixHint: "run `ssh " + host + " true` in a terminal; if that works, add \"env\": {\"PROGRAMDATA\": \"C:\\\\ProgramData\"} to the server's entry in the client's config and report it"}
	}
	what := fmt.Sprintf("ssh to the Pi ended before raspi-mcp answered (exit status %d)", code)
	return fallback.Down{Reason: quote(what), FixHint: try}
}

// lastLine is the last non-blank line of s, without ssh's "ssh: " prefix.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(strings.ReplaceAll(s, "\r", "")), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			return strings.TrimPrefix(l, "ssh: ")
		}
	}
	return ""
}

// tailBuffer passes ssh's stderr through and keeps its last 4 KiB.
type tailBuffer struct {
	mu   sync.Mutex
	buf  []byte
	done chan struct{}
}

func (t *tailBuffer) copy(r io.ReadCloser, w io.Writer) {
	defer close(t.done)
	defer r.Close()
	b := make([]byte, 4096)
	for {
		n, err := r.Read(b)
		if n > 0 {
			_, _ = w.Write(b[:n])
			t.mu.Lock()
			t.buf = append(t.buf, b[:n]...)
			if len(t.buf) > 4096 {
				t.buf = t.buf[len(t.buf)-4096:]
			}
			t.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// wait waits for the end of stderr, at most d: a master connection left in
// the background (ControlPersist) holds it open after this ssh is gone,
// and what ssh wrote before it exited is in the pipe already.
func (t *tailBuffer) wait(d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-t.done:
	case <-timer.C:
	}
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
