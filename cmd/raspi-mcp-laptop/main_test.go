package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// Wrong arguments are exit 2 with the usage on stderr, and the client that
// started the server still completes its handshake and reads what is wrong
// (it shows neither stderr nor the exit); help and version answer at once.
func TestRun(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir()) // an empty pairing store
	t.Setenv("HOME", t.TempDir())
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}` + "\n"
	for _, tc := range []struct {
		args        []string
		code        int
		out, errOut string
	}{
		{[]string{"connect", "https", "https://pi:8443", "--fingerprint", "sha256:00", "--token-env", "RASPI_MCP_TEST_NOT_SET"}, 2,
			`"instructions":"raspi-mcp is unavailable from this laptop: raspi-mcp-laptop's arguments are wrong: `, "not set"},
		{[]string{"connect", "https", "https://pi:8443", "--fingerprint", "sha256:00", "--token-file", "/nonexistent/token"}, 2,
			"token file", "no such file"},
		{[]string{"connect", "https", "http://pi:8443", "--fingerprint", strings.Repeat("ab", 32), "--token-env", "PATH"}, 2,
			"want https", "in the clear"},
		{[]string{"connect", "https", "https://pi:8443", "--fingerprint", "sha256:00", "--token-env", "PATH"}, 2,
			"64 hex digits", "64 hex digits"},
		{[]string{"connect", "ssh", "-oProxyCommand=x"}, 2, "raspi-mcp-laptop's arguments are wrong", "flag provided but not defined"},
		{[]string{"connect", "ssh", "--", "-oProxyCommand=x"}, 2, "ssh host", "ssh host"},
		{[]string{"connect", "ssh", "pi", "other"}, 2, "takes 1 argument", "takes 1 argument"},
		{[]string{"connect", "telnet", "pi"}, 2, "takes 1 argument", "takes 1 argument"}, // the one-argument SSH form, given two
		{[]string{"connect", "paired:kitchen"}, 2, "not paired", "pair it first"},
		{[]string{"connect", "paired", "kitchen"}, 2, "not paired", "pair it first"},
		{[]string{"pair", "raspi-mcp-pair:v1:garbage"}, 1, "", "damaged or incomplete"},
		{[]string{"pair", "list"}, 0, "", ""},
		{[]string{"version"}, 0, "raspi-mcp-laptop 0.1.0-dev", ""},
		{[]string{"help"}, 0, "connect https URL --fingerprint", ""},
		{nil, 2, "", "usage:"},
	} {
		var out, errOut bytes.Buffer
		code := run(context.Background(), tc.args, strings.NewReader(initialize), &out, &errOut)
		if code != tc.code || !strings.Contains(out.String(), tc.out) || !strings.Contains(errOut.String(), tc.errOut) {
			t.Errorf("%q: exit %d (want %d)\nstdout: %s\nstderr: %s", tc.args, code, tc.code, out.String(), errOut.String())
		}
	}
}
