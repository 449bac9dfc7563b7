package config

import (
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// up builds a one-upstream config from the keys of its table.
func up(keys string) []byte {
	return []byte("[[upstream]]\n" + keys + "\n")
}

// pin is a well-formed certificate fingerprint, as raspi-mcp status prints it.
const pin = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// colons writes hex as openssl does: byte pairs separated by colons.
func colons(hex string) string {
	var pairs []string
	for i := 0; i < len(hex); i += 2 {
		pairs = append(pairs, hex[i:i+2])
	}
	return strings.Join(pairs, ":")
}

func TestUpstreamValidation(t *testing.T) {
	const hs4 = "name = \"hs4\"\nurl = \"http://hs4.local/mcp\"\n"
	const garage = "name = \"garage\"\nurl = \"https://garage.local:8443/mcp\"\n"
	good := []string{
		hs4,
		"name = \"h\"\nurl = \"https://192.168.1.20:8443/mcp\"",
		"name = \"hs4\"\nurl = \"http://10.1.2.3/mcp\"",
		"name = \"hs4\"\nurl = \"http://172.16.0.9/mcp\"",
		"name = \"hs4\"\nurl = \"http://127.0.0.1:8080/mcp\"",
		"name = \"hs4\"\nurl = \"http://169.254.3.4/mcp\"",
		"name = \"hs4\"\nurl = \"http://[::1]:8080/mcp\"",
		"name = \"hs4\"\nurl = \"http://[fd00::5]/mcp\"",
		"name = \"hs4\"\nurl = \"http://[fe80::1%25eth0]:80/mcp\"",
		"name = \"hs4\"\nurl = \"http://[::ffff:192.168.1.2]/mcp\"",
		"name = \"hs4\"\nurl = \"http://hs4/mcp\"",                 // single label
		"name = \"hs4\"\nurl = \"http://HS4.Local./mcp\"",          // case, trailing dot
		"name = \"hs4\"\nurl = \"http://home_assistant:8123/mcp\"", // docker-style name
		"name = \"hs4\"\nurl = \"https://mcp.example.com/mcp\"",    // names are checked after DNS
		"name = \"hs4\"\nurl = \"http://100.101.102.103/mcp\"\nallow_hosts = [\"100.64.0.0/10\"]",
		"name = \"hs4\"\nurl = \"http://8.8.8.8/mcp\"\nallow_hosts = [\"8.8.8.8\"]",
		"name = \"hs4\"\nurl = \"http://8.8.8.8/mcp\"\nallow_hosts = [\"::ffff:8.8.8.0/120\"]",
		"name = \"hs4\"\nurl = \"http://[2001:db8::1]/mcp\"\nallow_hosts = [\"2001:db8::/32\"]",
		"name = \"a123456789abcdef\"\nurl = \"http://hs4.local/mcp\"", // 16 characters
		"name = \"hook\"\ncommand = \"/usr/local/bin/hookaido\"\nargs = [\"mcp\", \"--stdio\"]",
		"name = \"hook\"\ncommand = \"hookaido\"",
		hs4 + "token = \"env:HS4_TOKEN\"",
		hs4 + "token = \"file:/etc/raspi-mcp/hs4.token\"",
		hs4 + "timeout = \"1s\"",
		hs4 + "timeout = \"5m\"",
		hs4 + "enabled = false",
		hs4 + "allow = [\"devices_*\", \"events_list\"]\ndeny = [\"devices_delete*\"]",
		hs4 + "critical = []",
		hs4 + "critical = [\"*reset*\", \"system_?\"]",
		hs4 + "rules = [ { match = \"devices_*\", role = \"operate\", risk = \"low\" }, { match = \"x\", risk = \"read\" }, { match = \"y\", role = \"admin\" } ]",
		hs4 + "allow_hosts = [\"hs4.example.com\", \"10.0.0.0/8\", \"fd00::1\"]",
		garage + "tls_fingerprint = \"" + pin + "\"",
		garage + "tls_fingerprint = \"sha256:" + strings.ToUpper(pin[7:]) + "\"",
		garage + "tls_fingerprint = \"sha256:" + colons(pin[7:]) + "\"",
		"name = \"garage\"\nurl = \"HTTPS://garage.local:8443/mcp\"\ntls_fingerprint = \"" + pin + "\"",
	}
	for _, keys := range good {
		if _, err := Parse(up(keys)); err != nil {
			t.Errorf("Parse(%q) = %v, want ok", keys, err)
		}
	}
	for _, tc := range []struct{ keys, want string }{
		{"url = \"http://hs4.local/mcp\"", `upstream[0] "": name: want 1 to 16 lowercase letters`},
		{"name = \"HS4\"\nurl = \"http://hs4.local/mcp\"", `upstream[0] "HS4": name:`},
		{"name = \"hs_4\"\nurl = \"http://hs4.local/mcp\"", `upstream[0] "hs_4": name:`},
		{"name = \"4hs\"\nurl = \"http://hs4.local/mcp\"", `upstream[0] "4hs": name:`},
		{"name = \"a123456789abcdefg\"\nurl = \"http://hs4.local/mcp\"", `name: want 1 to 16`},
		{"name = \"gpio\"\nurl = \"http://hs4.local/mcp\"", `upstream[0] "gpio": name: "gpio" is a local namespace`},
		{"name = \"system\"\nurl = \"http://hs4.local/mcp\"", `"system" is a local namespace`},
		{"name = \"jobs\"\nurl = \"http://hs4.local/mcp\"", `"jobs" is a local namespace`},
		{"name = \"hs4\"", `upstream[0] "hs4": url, command: want url`},
		{hs4 + "command = \"/bin/x\"", `upstream[0] "hs4": url, command: set one of them, not both`},
		{"name = \"hs4\"\nurl = \"ftp://hs4.local/mcp\"", `upstream[0] "hs4": url: want an http:// or https:// URL, got scheme "ftp"`},
		{"name = \"hs4\"\nurl = \"hs4.local/mcp\"", `url: want an http:// or https:// URL`},
		{"name = \"hs4\"\nurl = \"http:///mcp\"", `url: want a host`},
		{"name = \"hs4\"\nurl = \"http://hs4.local:x/mcp\"", `url: not a valid URL`},
		{"name = \"hs4\"\nurl = \"http://bad host/mcp\"", `url: not a valid URL`},
		{"name = \"hs4\"\nurl = \"http://-bad.local/mcp\"", `url: want a host name`},
		{"name = \"hs4\"\nurl = \"http://8.8.8.8/mcp\"", `upstream[0] "hs4": url: 8.8.8.8 is not a loopback, private or link-local address; add it to allow_hosts`},
		{"name = \"hs4\"\nurl = \"http://100.64.1.1/mcp\"", `url: 100.64.1.1 is not`},
		{"name = \"hs4\"\nurl = \"http://0.0.0.0/mcp\"", `url: 0.0.0.0 is not`},
		{"name = \"hs4\"\nurl = \"http://[2001:db8::1]/mcp\"", `url: 2001:db8::1 is not`},
		{"name = \"hs4\"\nurl = \"http://[::ffff:8.8.8.8]/mcp\"", `url: ::ffff:8.8.8.8 is not`},
		{"name = \"hs4\"\nurl = \"http://8.8.8.8/mcp\"\nallow_hosts = [\"8.8.4.0/24\"]", `url: 8.8.8.8 is not`},
		{"name = \"hs4\"\nurl = \"http://me:pw@hs4.local/mcp\"", `url: must not carry credentials`},
		{hs4 + "args = [\"x\"]", `upstream[0] "hs4": args: only with command`},
		{"name = \"hook\"\ncommand = \"bin/hookaido\"", `upstream[0] "hook": command: want an absolute path or a bare name`},
		{"name = \"hook\"\ncommand = \"./hookaido\"", `command: want an absolute path`},
		{"name = \"hook\"\ncommand = \"-x\"", `command: want a program`},
		{"name = \"hook\"\ncommand = \"/bin/h\"\ntoken = \"env:X\"", `upstream[0] "hook": token: only with url`},
		{"name = \"hook\"\ncommand = \"/bin/h\"\nallow_hosts = [\"x\"]", `upstream[0] "hook": allow_hosts: only with url`},
		{hs4 + "token = \"sk-0123456789\"", `upstream[0] "hs4": token: an inline token is not allowed`},
		{hs4 + "token = \"Bearer abc\"", `use token = "env:NAME" or token = "file:/path"`},
		{hs4 + "token = \"env:\"", `token: env: wants an environment variable name`},
		{hs4 + "token = \"env:HS4-TOKEN\"", `token: env: wants an environment variable name`},
		{hs4 + "token = \"file:hs4.token\"", `token: file: wants an absolute path`},
		{hs4 + "timeout = \"500ms\"", `upstream[0] "hs4": timeout: want 1s..5m, got 500ms`},
		{hs4 + "timeout = \"6m\"", `timeout: want 1s..5m, got 6m0s`},
		{hs4 + "timeout = \"-1s\"", `timeout: want 1s..5m`},
		{hs4 + "timeout = \"soon\"", `timeout`},
		{hs4 + "enabled = \"yes\"", `upstream.enabled`},
		{hs4 + "allow = []", `upstream[0] "hs4": allow: an empty list exposes no tool`},
		{hs4 + "allow = [\"[a-\"]", `upstream[0] "hs4": allow: bad glob "[a-"`},
		{hs4 + "allow = [\"\"]", `allow: want a tool name or glob`},
		{hs4 + "deny = [\"a[\"]", `upstream[0] "hs4": deny: bad glob`},
		{hs4 + "critical = [\"\\\\\"]", `upstream[0] "hs4": critical: bad glob`},
		{hs4 + "rules = [ { match = \"[\", role = \"read\" } ]", `upstream[0] "hs4": rules[0].match: bad glob`},
		{hs4 + "rules = [ { role = \"read\" } ]", `rules[0].match: want a tool name or glob`},
		{hs4 + "rules = [ { match = \"a\", role = \"read\" }, { match = \"b\" } ]", `upstream[0] "hs4": rules[1]: want role, risk or both`},
		{hs4 + "rules = [ { match = \"a\", role = \"root\" } ]", `rules[0].role: want one of read, operate, admin, got "root"`},
		{hs4 + "rules = [ { match = \"a\", risk = \"medium\" } ]", `rules[0].risk: want one of read, low, high, critical, got "medium"`},
		{hs4 + "rules = [ { match = \"a\", role = \"read\", colour = \"red\" } ]", `unknown key "upstream.rules.colour"`},
		{hs4 + "allow_hosts = [\"10.0.0.0/33\"]", `upstream[0] "hs4": allow_hosts: want a host name, an IP address or a CIDR prefix`},
		{hs4 + "allow_hosts = [\"bad host\"]", `allow_hosts: want a host name, got "bad host"`},
		{hs4 + "allow_hosts = [\"\"]", `allow_hosts: want a host name`},
		{hs4 + "tokn = \"env:X\"", `unknown key "upstream.tokn"`},
		{hs4 + "tls_fingerprint = \"" + pin + "\"", `upstream[0] "hs4": tls_fingerprint: only with an https:// url`},
		{"name = \"hook\"\ncommand = \"/bin/h\"\ntls_fingerprint = \"" + pin + "\"", `upstream[0] "hook": tls_fingerprint: only with an https:// url`},
		{garage + "tls_fingerprint = \"" + pin[7:] + "\"", `upstream[0] "garage": tls_fingerprint: want "sha256:" and 64 hex digits`},
		{garage + "tls_fingerprint = \"sha1:" + pin[7:47] + "\"", `tls_fingerprint: want "sha256:"`},
		{garage + "tls_fingerprint = \"" + pin[:70] + "\"", `tls_fingerprint: want "sha256:"`},
		{garage + "tls_fingerprint = \"" + pin + "00\"", `tls_fingerprint: want "sha256:"`},
		{garage + "tls_fingerprint = \"" + pin[:69] + "g\"", `tls_fingerprint: want "sha256:"`},
		{garage + "tls_fingerprint = \"sha256:" + colons(pin[7:])[1:] + "\"", `tls_fingerprint: want "sha256:"`},
		{hs4 + "connect_timeout = \"5s\"", `unknown key "upstream.connect_timeout"`},
	} {
		_, err := Parse(up(tc.keys))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want error containing %q", tc.keys, err, tc.want)
		}
	}
}

// Every accepted spelling of a fingerprint gives the form status prints.
func TestUpstreamFingerprint(t *testing.T) {
	for _, in := range []string{pin, "sha256:" + strings.ToUpper(pin[7:]), "sha256:" + colons(pin[7:])} {
		if got := (Upstream{TLSFingerprint: in}).Fingerprint(); got != pin {
			t.Errorf("Fingerprint(%q) = %q, want %q", in, got, pin)
		}
	}
	for _, in := range []string{"", pin[7:], pin + "0"} {
		if got := (Upstream{TLSFingerprint: in}).Fingerprint(); got != "" {
			t.Errorf("Fingerprint(%q) = %q, want \"\"", in, got)
		}
	}
}

func TestUpstreamNames(t *testing.T) {
	two := "[[upstream]]\nname = \"hs4\"\nurl = \"http://hs4.local/mcp\"\n[[upstream]]\nname = \"hs4\"\ncommand = \"/bin/x\"\n"
	if _, err := Parse([]byte(two)); err == nil || !strings.Contains(err.Error(), `upstream[1] "hs4": name: used by an earlier upstream`) {
		t.Errorf("duplicate name: %v", err)
	}
	for _, ns := range LocalNamespaces() {
		if _, err := Parse(up("name = \"" + ns + "\"\ncommand = \"/bin/x\"")); err == nil {
			t.Errorf("upstream named after local namespace %q accepted", ns)
		}
	}
	c, err := Parse([]byte("[[upstream]]\nname = \"hs4\"\nurl = \"http://hs4.local/mcp\"\n[[upstream]]\nname = \"hook\"\ncommand = \"/bin/x\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CheckUpstreamNames([]string{"system", "gpio"}); err != nil {
		t.Errorf("CheckUpstreamNames = %v", err)
	}
	if err := c.CheckUpstreamNames([]string{"system", "hook"}); err == nil || !strings.Contains(err.Error(), `upstream[1] "hook": name: "hook" is a local namespace`) {
		t.Errorf("CheckUpstreamNames(hook) = %v", err)
	}
}

// The inline token must never be echoed, whatever it looks like.
func TestUpstreamErrorsHideSecrets(t *testing.T) {
	for _, keys := range []string{
		"name = \"hs4\"\nurl = \"http://hs4.local/mcp\"\ntoken = \"s3cr3t-VALUE\"",
		"name = \"hs4\"\nurl = \"http://hs4.local/mcp\"\ntoken = \"env:s3cr3t-VALUE\"",
		"name = \"hs4\"\nurl = \"http://hs4.local/mcp\"\ntoken = \"file:s3cr3t-VALUE\"",
		"name = \"hs4\"\nurl = \"http://me:s3cr3t-VALUE@hs4.local/mcp\"",
		"name = \"hs4\"\nurl = \"http://8.8.8.8/mcp?key=s3cr3t-VALUE\"",
	} {
		_, err := Parse(up(keys))
		if err == nil || strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("Parse(%q) = %v, want an error without the secret", keys, err)
		}
	}
	u := Upstream{Name: "hs4", Token: "s3cr3t-VALUE"}
	if ref := u.TokenRef(); strings.Contains(ref, "s3cr3t") {
		t.Errorf("TokenRef = %q", ref)
	}
	if _, err := u.BearerToken(); err == nil || strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("BearerToken = %v", err)
	}
}

func TestUpstreamDefaults(t *testing.T) {
	if d := Default(); d.Upstreams != nil {
		t.Fatalf("Default has upstreams: %+v", d.Upstreams)
	}
	c, err := Parse(up("name = \"hs4\"\nurl = \"http://hs4.local/mcp\""))
	if err != nil {
		t.Fatal(err)
	}
	u := c.Upstreams[0]
	if !u.IsEnabled() || u.CallTimeout() != 10*time.Second || u.TokenRef() != "" {
		t.Errorf("defaults: enabled %v timeout %s token %q", u.IsEnabled(), u.CallTimeout(), u.TokenRef())
	}
	if tok, err := u.BearerToken(); tok != "" || err != nil {
		t.Errorf("BearerToken without token = %q, %v", tok, err)
	}
	if u.Host() != "hs4.local" {
		t.Errorf("Host = %q", u.Host())
	}
	off := false
	want := Upstream{Name: "hs4", URL: "http://hs4.local/mcp", Timeout: Duration(10 * time.Second), Enabled: new(bool),
		Allow: []string{"*"}, Critical: []string{"*admin*", "*delete*"}}
	*want.Enabled = true
	if got := u.WithDefaults(); !reflect.DeepEqual(got, want) {
		t.Errorf("WithDefaults = %+v, want %+v", got, want)
	}
	u.Enabled, u.Timeout = &off, Duration(time.Minute)
	if u.IsEnabled() || u.CallTimeout() != time.Minute {
		t.Errorf("set: enabled %v timeout %s", u.IsEnabled(), u.CallTimeout())
	}
	if d := u.WithDefaults(); *d.Enabled || d.Timeout.D() != time.Minute {
		t.Errorf("WithDefaults overrode set keys: %+v", d)
	}
	if u.Host() != "hs4.local" || (Upstream{Command: "/bin/x"}).Host() != "" {
		t.Errorf("Host")
	}
	if h := (Upstream{URL: "http://[FE80::1%25eth0]:80/"}).Host(); h != "fe80::1%eth0" {
		t.Errorf("Host = %q", h)
	}
}

func TestBearerToken(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Setenv("RASPI_MCP_TEST_TOKEN", "tok-env")
	t.Setenv("RASPI_MCP_TEST_EMPTY", "")
	t.Setenv("RASPI_MCP_TEST_SPACE", "tok en")
	os.Unsetenv("RASPI_MCP_TEST_UNSET")
	lf := write("lf", "tok-file\n")
	crlf := write("crlf", "tok-file\r\n")
	bare := write("bare", "tok-file")
	empty := write("empty", "\n")
	twoLines := write("two", "tok\nmore\n")
	big := write("big", strings.Repeat("a", maxTokenBytes+1))
	for _, tc := range []struct{ ref, want, err string }{
		{"", "", ""},
		{"env:RASPI_MCP_TEST_TOKEN", "tok-env", ""},
		{"env:RASPI_MCP_TEST_UNSET", "", `upstream "hs4": token env:RASPI_MCP_TEST_UNSET: environment variable not set`},
		{"env:RASPI_MCP_TEST_EMPTY", "", `upstream "hs4": token env:RASPI_MCP_TEST_EMPTY: empty`},
		{"env:RASPI_MCP_TEST_SPACE", "", `token env:RASPI_MCP_TEST_SPACE: contains whitespace or control characters`},
		{"file:" + lf, "tok-file", ""},
		{"file:" + crlf, "tok-file", ""},
		{"file:" + bare, "tok-file", ""},
		{"file:" + empty, "", `upstream "hs4": token file:` + empty + `: empty`},
		{"file:" + twoLines, "", `contains whitespace or control characters`},
		{"file:" + big, "", `larger than`},
		{"file:" + filepath.Join(dir, "missing"), "", `upstream "hs4": token file:` + filepath.Join(dir, "missing") + `: open`},
		{"inline", "", `upstream "hs4": token: an inline token is not allowed`},
	} {
		u := Upstream{Name: "hs4", URL: "http://hs4.local/mcp", Token: tc.ref}
		got, err := u.BearerToken()
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("BearerToken(%s) = %q, %v, want %q", tc.ref, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || got != ""):
			t.Errorf("BearerToken(%s) = %q, %v, want error containing %q", tc.ref, got, err, tc.err)
		case err != nil && (strings.Contains(err.Error(), "tok-") || strings.Contains(err.Error(), "more")):
			t.Errorf("BearerToken(%s) error shows the value: %v", tc.ref, err)
		}
		wantRef := tc.ref
		if tc.ref == "inline" {
			wantRef = "(invalid)"
		}
		if ref := u.TokenRef(); ref != wantRef {
			t.Errorf("TokenRef(%s) = %q", tc.ref, ref)
		}
	}
}

func TestUpstreamExposes(t *testing.T) {
	for _, tc := range []struct {
		allow, deny []string
		tool        string
		want        bool
	}{
		{nil, nil, "devices_list", true}, // default allow ["*"]
		{nil, []string{}, "anything", true},
		{nil, []string{"devices_delete*"}, "devices_delete_all", false},
		{nil, []string{"devices_delete*"}, "devices_list", true},
		{[]string{"devices_*"}, nil, "devices_list", true},
		{[]string{"devices_*"}, nil, "events_list", false},
		{[]string{"devices_*", "events_list"}, nil, "events_list", true},
		{[]string{"devices_*"}, []string{"*"}, "devices_list", false}, // deny wins
		{[]string{"devices_?"}, nil, "devices_1", true},
		{[]string{"devices_?"}, nil, "devices_10", false},
		{[]string{"[de]*"}, nil, "events", true},
		{[]string{"*"}, nil, "a/b", false}, // path.Match: * does not cross /
	} {
		u := Upstream{Name: "hs4", Allow: tc.allow, Deny: tc.deny}
		if got := u.Exposes(tc.tool); got != tc.want {
			t.Errorf("allow %v deny %v: Exposes(%q) = %v, want %v", tc.allow, tc.deny, tc.tool, got, tc.want)
		}
	}
}

func TestUpstreamRuleFor(t *testing.T) {
	rules := []UpstreamRule{
		{Match: "devices_set*", Role: "operate", Risk: "low"},
		{Match: "devices_*", Risk: "read"},    // only risk: role read
		{Match: "scenes_*", Risk: "critical"}, // only risk: role admin
		{Match: "events_*", Risk: "low"},      // only risk: role operate
		{Match: "log_*", Role: "admin"},       // only role: default risk
		{Match: "*_purge", Risk: "high"},
		{Match: "*_purge", Role: "read"}, // never reached: first match wins
	}
	for _, tc := range []struct {
		critical   []string
		rules      []UpstreamRule
		tool       string
		ro         bool
		role, risk string
	}{
		// The default table.
		{nil, nil, "devices_list", true, "read", "read"},
		{nil, nil, "devices_set", false, "operate", "high"},
		{nil, nil, "user_admin", false, "admin", "critical"},
		{nil, nil, "admin_users", true, "admin", "critical"}, // critical glob beats readOnlyHint
		{nil, nil, "devices_delete", false, "admin", "critical"},
		{[]string{}, nil, "devices_delete", false, "operate", "high"},
		{[]string{}, nil, "devices_delete", true, "read", "read"},
		{[]string{"*reset*"}, nil, "factory_reset", false, "admin", "critical"},
		{[]string{"*reset*"}, nil, "user_admin", false, "operate", "high"},
		// Rules.
		{nil, rules, "devices_set_value", false, "operate", "low"},
		{nil, rules, "devices_list", false, "read", "read"},
		{nil, rules, "devices_delete", false, "read", "read"}, // a rule beats the critical glob
		{nil, rules, "scenes_run", true, "admin", "critical"},
		{nil, rules, "events_fire", false, "operate", "low"},
		{nil, rules, "log_read", true, "admin", "read"},
		{nil, rules, "log_clear", false, "admin", "high"},
		{nil, rules, "log_admin", false, "admin", "critical"},
		{nil, rules, "cache_purge", false, "operate", "high"},
		{nil, rules, "other", false, "operate", "high"},
		{nil, rules, "other", true, "read", "read"},
	} {
		u := Upstream{Name: "hs4", Critical: tc.critical, Rules: tc.rules}
		role, risk := u.RuleFor(tc.tool, tc.ro)
		if role != tc.role || risk != tc.risk {
			t.Errorf("critical %v rules %d: RuleFor(%q, %v) = %s, %s, want %s, %s", tc.critical, len(tc.rules), tc.tool, tc.ro, role, risk, tc.role, tc.risk)
		}
	}
}

func TestUpstreamCheckAddrs(t *testing.T) {
	a := netip.MustParseAddr
	addrs := func(s ...string) []netip.Addr {
		out := make([]netip.Addr, len(s))
		for i, x := range s {
			out[i] = a(x)
		}
		return out
	}
	plain := Upstream{Name: "hs4", URL: "http://hs4.local/mcp"}
	listed := Upstream{Name: "hs4", URL: "https://mcp.example.com/mcp",
		AllowHosts: []string{"MCP.example.com.", "100.64.0.0/10", "203.0.113.7", "2001:db8::/32"}}
	for _, tc := range []struct {
		u     Upstream
		host  string
		addrs []netip.Addr
		err   string
	}{
		{plain, "hs4.local", addrs("192.168.1.20"), ""},
		{plain, "hs4.local", addrs("10.0.0.1", "172.31.255.255", "127.0.0.1", "::1", "fd12::1", "fe80::1", "169.254.1.1"), ""},
		{plain, "hs4.local", addrs("fe80::1%eth0"), ""},
		{plain, "hs4.local", addrs("::ffff:192.168.1.20"), ""},
		{plain, "hs4.local", nil, `upstream "hs4": host hs4.local resolved to no address`},
		{plain, "hs4.local", addrs("192.168.1.20", "93.184.216.34"), `upstream "hs4": host hs4.local resolved to 93.184.216.34, which is not a loopback, private or link-local address`},
		{plain, "hs4.local", addrs("172.32.0.1"), `resolved to 172.32.0.1`},
		{plain, "hs4.local", addrs("100.64.0.1"), `resolved to 100.64.0.1`},
		{plain, "hs4.local", addrs("0.0.0.0"), `resolved to 0.0.0.0`},
		{plain, "hs4.local", addrs("::"), `resolved to ::`},
		{plain, "hs4.local", addrs("224.0.0.1"), `resolved to 224.0.0.1`},
		{plain, "hs4.local", addrs("::ffff:8.8.8.8"), `resolved to ::ffff:8.8.8.8`},
		{plain, "hs4.local", addrs("2001:db8::1"), `resolved to 2001:db8::1`},
		{plain, "hs4.local", addrs("64:ff9b::808:808"), `resolved to 64:ff9b::808:808`},
		// The host listed by name: any address.
		{listed, "mcp.example.com", addrs("93.184.216.34"), ""},
		{listed, "MCP.EXAMPLE.COM.", addrs("93.184.216.34"), ""},
		{listed, "other.example.com", addrs("93.184.216.34"), `host other.example.com resolved to 93.184.216.34`},
		{listed, "example.com", addrs("93.184.216.34"), `resolved to`}, // no wildcards
		// Addresses listed, singly or by prefix.
		{listed, "ts.local", addrs("100.100.1.2"), ""},
		{listed, "ts.local", addrs("100.128.0.1"), `resolved to 100.128.0.1`},
		{listed, "x.local", addrs("203.0.113.7", "192.168.0.2"), ""},
		{listed, "x.local", addrs("::ffff:203.0.113.7"), ""},
		{listed, "x.local", addrs("203.0.113.8"), `resolved to 203.0.113.8`},
		{listed, "x.local", addrs("2001:db8:1::5"), ""},
		{listed, "x.local", addrs("2001:db9::5"), `resolved to 2001:db9::5`},
	} {
		err := tc.u.CheckAddrs(tc.host, tc.addrs)
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("CheckAddrs(%s, %v) with allow_hosts %v = %v, want %q", tc.host, tc.addrs, tc.u.AllowHosts, err, tc.err)
		}
	}
}

const upstreamsTOML = `
[[upstream]]
name = "hs4"
url = "http://hs4.local/mcp"
token = "env:HS4_TOKEN"
timeout = "30s"
allow = ["devices_*", "events_*"]
deny = ["devices_delete*"]
critical = []
rules = [ { match = "devices_set*", role = "operate", risk = "low" }, { match = "events_*", risk = "read" } ]
allow_hosts = ["hs4.example.com", "100.64.0.0/10"]

[[upstream]]
name = "hook"
command = "/usr/local/bin/hookaido"
args = ["mcp", "--stdio"]
enabled = false

[[upstream]]
name = "plain"
url = "https://192.168.1.9/mcp"
`

func TestUpstreamsRoundTrip(t *testing.T) {
	c, err := Parse([]byte(upstreamsTOML))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Upstreams) != 3 || c.Upstreams[0].Rules[1].Risk != "read" || c.Upstreams[1].IsEnabled() || !c.Upstreams[2].IsEnabled() ||
		c.Upstreams[0].Critical == nil || len(c.Upstreams[0].Critical) != 0 || c.Upstreams[2].Critical != nil {
		t.Fatalf("upstreams = %+v", c.Upstreams)
	}
	enc, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(enc)
	if err != nil {
		t.Fatalf("encoded config does not re-parse: %v\n%s", err, enc)
	}
	if !reflect.DeepEqual(back, c) {
		t.Fatalf("round trip differs:\n%+v\n%+v\n%s", back.Upstreams, c.Upstreams, enc)
	}
	// critical = [] (nothing critical) must not turn back into the default.
	if got, _ := back.Upstreams[0].RuleFor("x_delete", false); got != "operate" {
		t.Errorf("critical = [] lost in the round trip:\n%s", enc)
	}
}

// `serve --sim --config FILE` keeps FILE's upstreams.
func TestLaptopKeepsUpstreams(t *testing.T) {
	base, err := Parse([]byte(upstreamsTOML))
	if err != nil {
		t.Fatal(err)
	}
	c := LaptopFrom(base, "/tmp/x", "alice")
	if !reflect.DeepEqual(c.Upstreams, base.Upstreams) {
		t.Fatalf("laptop upstreams = %+v, want %+v", c.Upstreams, base.Upstreams)
	}
	enc, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(enc)
	if err != nil {
		t.Fatalf("laptop config does not re-parse: %v\n%s", err, enc)
	}
	if !reflect.DeepEqual(back, c) {
		t.Fatalf("round trip differs:\n%+v\n%+v", back.Upstreams, c.Upstreams)
	}
	if l := Laptop("/tmp/x", "alice"); l.Upstreams != nil {
		t.Errorf("Laptop has upstreams: %+v", l.Upstreams)
	}
}

// Several files: the list of the last file that has [[upstream]] tables.
func TestUpstreamsDropIn(t *testing.T) {
	dir := t.TempDir()
	main := filepath.Join(dir, "config.toml")
	writeFile(t, main, "[[upstream]]\nname = \"hs4\"\nurl = \"http://hs4.local/mcp\"\n")
	writeFile(t, filepath.Join(dir, "config.d", "10-more.toml"), "[system]\nreboot = true\n")
	c, err := Load(main)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Upstreams) != 1 || c.Upstreams[0].Name != "hs4" {
		t.Errorf("upstreams = %+v", c.Upstreams)
	}
	writeFile(t, filepath.Join(dir, "config.d", "20-up.toml"),
		"[[upstream]]\nname = \"hook\"\ncommand = \"/bin/hook\"\n[[upstream]]\nname = \"hs5\"\nurl = \"http://hs5.local/mcp\"\n")
	writeFile(t, main, "")
	c, err = Load(main)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Upstreams) != 2 || c.Upstreams[0].Name != "hook" || c.Upstreams[1].Name != "hs5" {
		t.Errorf("upstreams = %+v", c.Upstreams)
	}
}

// The commented [[upstream]] example in config.example.toml, uncommented,
// is a valid config with the defaults it claims.
func TestUpstreamExampleParses(t *testing.T) {
	data, err := os.ReadFile("../config.example.toml")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(data), "\n# [[upstream]]\n")
	if !ok {
		t.Fatal("config.example.toml has no commented [[upstream]] example")
	}
	var b strings.Builder
	b.WriteString("[[upstream]]\n")
	for _, line := range strings.Split(block, "\n") {
		line = strings.TrimPrefix(strings.TrimPrefix(line, "#"), " ")
		if !strings.HasPrefix(line, "#") {
			b.WriteString(line + "\n")
		}
	}
	c, err := Parse([]byte(b.String()))
	if err != nil {
		t.Fatalf("uncommented example does not parse: %v\n%s", err, b.String())
	}
	u := c.Upstreams[0]
	d := Upstream{Name: u.Name, URL: u.URL, Token: u.Token, Rules: u.Rules}.WithDefaults()
	d.Deny, d.AllowHosts = []string{}, []string{}
	if !reflect.DeepEqual(u, d) {
		t.Errorf("example keys are not the defaults:\n got  %+v\n want %+v", u, d)
	}
}
