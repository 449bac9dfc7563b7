package main

import (
	"crypto/tls"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/internal/bearer"
	"github.com/raspi-mcp/raspi-mcp/internal/webguard"
	"github.com/raspi-mcp/raspi-mcp/pairing"
)

// httpFix is how to turn on the HTTP endpoint with TLS, for the errors of
// a pairing that cannot work without it.
const httpFix = `turn it on in /etc/raspi-mcp/config.d/http.toml: [http] listen = "0.0.0.0:8443", tls = true, names = ["HOSTNAME.local"], then sudo systemctl restart raspi-mcp (README: Connect over HTTP)`

// cmdPair is `raspi-mcp pair NAME --role R`: on the Pi, a token for a
// laptop and the line that carries it there with the address and the
// certificate's fingerprint, so the laptop pins the certificate instead of
// trusting a stranger's. Like token create it runs on the device, as root,
// never over MCP.
func cmdPair(args []string) error {
	return runPair(args, os.Stdout, os.Stderr, isTerminal(os.Stderr), pairEnv{})
}

// pairEnv is what pair asks the machine, replaced in tests.
type pairEnv struct {
	hostname func() (string, error)
}

func runPair(args []string, stdout, stderr io.Writer, ansi bool, env pairEnv) error {
	c := newCommand("pair", "NAME --role read|operate|admin [--profile P] [--expires 90d] [--address HOST:PORT] [--config FILE | --dir DIR]",
		"a token for a laptop, printed with the Pi's address and certificate fingerprint as one line and a QR code; pairing NAME again rotates its token")
	tokens := tokenFileFlags(c)
	role := c.fs.String("role", "", "the token's `ROLE`: read, operate or admin (as in [roles])")
	profile := c.fs.String("profile", "", "narrow the role to `PROFILE`: read-only, or a [profiles] name of the config (default: all, no narrowing)")
	expires := c.fs.String("expires", "none", "lifetime `TTL`: 30m, 12h, 90d, 8w, or none")
	address := c.fs.String("address", "", "`HOST:PORT` the laptop reaches the Pi at (default: [http] listen, with this host's name.local for 0.0.0.0 or ::)")
	pos, err := c.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return c.wrongArgs("pair takes one NAME: the laptop's, as the Pi's token list and audit trail will show it")
	}
	name := pos[0]
	if err := bearer.CheckName(name); err != nil {
		return err
	}
	switch *role {
	case "":
		return c.wrongArgs("pair needs --role (read, operate or admin)")
	case bearer.RoleRead, bearer.RoleOperate, bearer.RoleAdmin:
	default:
		return fmt.Errorf("--role %q: a paired laptop uses MCP: want read, operate or admin", *role)
	}
	ttl, f, cfg, prof, err := newTokenArgs(tokens, *expires, *profile)
	if err != nil {
		return err
	}
	if env.hostname == nil {
		env.hostname = os.Hostname
	}
	addr, err := pairAddress(cfg.HTTP, *address, env.hostname)
	if err != nil {
		return err
	}
	fp, warn, err := pairFingerprint(cfg, cmpOr(cfg.HTTP.Listen, addr))
	if err != nil {
		return err
	}
	if warn != "" {
		fmt.Fprintln(stderr, "raspi-mcp pair:", warn)
	}

	// Everything checked: rotate. The old token of this name goes first,
	// so its laptop is refused from its next request (and told to pair
	// again); every check that could fail has run, so the create fails
	// only if the file cannot be written, and then so did the revoke.
	toks, err := f.List()
	if err != nil {
		return asRoot(err)
	}
	rotated := false
	for _, t := range toks {
		if t.Name == name {
			if err := f.Revoke(name); err != nil {
				return asRoot(err)
			}
			rotated = true
		}
	}
	now := time.Now()
	secret, tok, err := f.CreateProfile(name, *role, prof, ttl, now)
	if err != nil {
		return asRoot(err)
	}
	line, err := pairing.Encode(pairing.Line{TokenName: tok.Name, URL: "https://" + addr + "/mcp", Fingerprint: fp,
		Token: secret, Role: tok.Role, Profile: tok.Profile, Expires: tok.Expires})
	if err != nil {
		_ = f.Revoke(name) // a token nobody can be given is of no use
		return err
	}

	what := "made"
	if rotated {
		what = "rotated: its old token is refused from now on"
	}
	fmt.Fprintf(stderr, "token %q (role %s, profile %s, expires %s) %s, in %s.\n", tok.Name, tok.Role, profileOf(tok), expiryUTC(tok), what, f.Path)
	fmt.Fprintln(stderr, "On the laptop, run: raspi-mcp-laptop pair LINE, with this line (its token is shown only now):")
	fmt.Fprintln(stderr)
	fmt.Fprintln(stdout, line)
	fmt.Fprintln(stderr)
	fmt.Fprintln(stderr, "or scan it:")
	width, err := pairing.WriteQR(stderr, line, ansi)
	if err != nil {
		return err
	}
	if width > 80 {
		fmt.Fprintf(stderr, "(the code is %d columns wide: widen the terminal to scan it, or copy the line)\n", width)
	}
	fmt.Fprintf(stderr, "It pairs the laptop with https://%s/mcp, certificate %s.\n", addr, fp)
	fmt.Fprintf(stderr, "raspi-mcp pair %s again rotates its token; raspi-mcp token revoke %s revokes it\n", name, name)
	if cfg.HTTP.TLSCert != "" {
		fmt.Fprintf(stderr, "The pairing pins this certificate (%s): pair again after renewing it.\n", cfg.HTTP.TLSCert)
	}
	return nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// pairAddress is HOST:PORT as the laptop will reach the agent: --address,
// else [http] listen, where an unspecified host (0.0.0.0, ::) is this
// machine's name with .local, as mDNS announces a Pi. The host must be
// one the agent answers to (webguard: loopback, the address connected to,
// or a name in [http] names); a name it would refuse is an error here,
// before any token is made, rather than a 403 on the laptop.
func pairAddress(h config.HTTP, address string, hostname func() (string, error)) (string, error) {
	if !h.TLS {
		return "", errors.New("pair: the HTTP endpoint has no TLS ([http] tls = true is off): a pairing pins the Pi's certificate; " + httpFix)
	}
	if address == "" && h.Listen == "" {
		return "", errors.New("pair: the HTTP endpoint is off ([http] listen is empty; with raspi-mcp-http.socket, give the address with --address HOST:PORT): " + httpFix)
	}
	hp := cmpOr(address, h.Listen)
	host, port, err := net.SplitHostPort(hp)
	if err != nil || port == "" || port == "0" {
		return "", fmt.Errorf("pair: address %q: want HOST:PORT, e.g. raspberrypi.local:8443", hp)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		if address != "" {
			return "", fmt.Errorf("pair: --address %q: name the Pi as the laptop reaches it (raspberrypi.local:%s)", address, port)
		}
		name, err := hostname()
		if err != nil || name == "" {
			return "", fmt.Errorf("pair: [http] listen %q listens on every address and this host's name is unknown (%v): give --address HOST:PORT", h.Listen, err)
		}
		if !strings.Contains(name, ".") {
			name += ".local"
		}
		host = strings.ToLower(name)
	}
	allowed := webguard.IsLoopbackHost(host) || net.ParseIP(host) != nil
	for _, n := range h.Names {
		allowed = allowed || strings.EqualFold(n, host)
	}
	if !allowed {
		return "", fmt.Errorf("pair: the agent refuses requests addressed to %q: add it to [http] names (names = [%q]) and restart the agent, or give --address with a name it has or the Pi's IP address", host, host)
	}
	return net.JoinHostPort(host, port), nil
}

// pairFingerprint is the SHA-256 of the certificate the agent serves: read
// from the agent at listen (this machine, so an unspecified host is
// loopback) when it answers, else from the certificate file the agent
// loads ([http] tls_cert, or the self-signed one beside the state file).
// warn says when the two differ or the agent did not answer.
func pairFingerprint(cfg config.Config, listen string) (fp, warn string, err error) {
	certPath := cfg.HTTP.TLSCert
	if certPath == "" {
		certPath = filepath.Join(filepath.Dir(cfg.Agent.State), webguard.CertFile)
	}
	fileFP, ferr := certFileFingerprint(certPath)
	served, serr := servedFingerprint(listen)
	switch {
	case serr == nil && ferr == nil && served != fileFP:
		return served, fmt.Sprintf("the agent serves a certificate (%s) other than %s's (%s): the pairing pins the one served; restart the agent (sudo systemctl restart raspi-mcp) and pair again if the file is the one you want", served, certPath, fileFP), nil
	case serr == nil:
		return served, "", nil
	case ferr == nil:
		return fileFP, fmt.Sprintf("the agent does not answer at %s (%v); the fingerprint is %s's: check with raspi-mcp status once it runs", listen, serr, certPath), nil
	case errors.Is(ferr, fs.ErrNotExist) && cfg.HTTP.TLSCert == "":
		return "", "", fmt.Errorf("pair: no certificate yet: the agent makes %s on its first start with [http] tls = true, and it does not answer at %s: start it (sudo systemctl restart raspi-mcp) and pair again", certPath, listen)
	}
	return "", "", fmt.Errorf("pair: the agent does not answer at %s (%v), and its certificate: %w", listen, serr, ferr)
}

// certFileFingerprint is the fingerprint of the first certificate of a
// PEM file.
func certFileFingerprint(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", asRoot(err)
	}
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return "", fmt.Errorf("pair: %s has no PEM certificate", path)
		}
		if blk.Type == "CERTIFICATE" {
			return webguard.Fingerprint(blk.Bytes), nil
		}
	}
}

// servedFingerprint asks the agent at listen for its certificate. Nothing
// is trusted or sent: the handshake only reads the certificate.
func servedFingerprint(listen string) (string, error) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", err
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip != nil && ip.To4() == nil {
			host = "::1"
		}
	}
	d := &net.Dialer{Timeout: 5 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", net.JoinHostPort(host, port), &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}) // #nosec: only the certificate is read
	if err != nil {
		return "", err
	}
	defer conn.Close()
	certs := conn.ConnectionState().PeerCertificates
	if len(certs) == 0 {
		return "", errors.New("no certificate")
	}
	return webguard.Fingerprint(certs[0].Raw), nil
}
