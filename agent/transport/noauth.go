package transport

import (
	"encoding/json"
	"net/http"
	"strings"
)

// How a refused token reaches the person rather than an OAuth sign-in.
//
// The endpoint takes bearer tokens made on the device and has no
// authorization server. Its 401 is what RFC 6750 §3 asks for (a Bearer
// challenge, error="invalid_token" with an error_description when a token
// came and was refused) and what the MCP authorization spec requires for a
// missing, unknown or expired token, with a body that says why and what to
// do: clients that report the body (Claude Code with a configured
// Authorization header, the TS SDK without an OAuth provider) show it.
//
// Clients built on the MCP TypeScript SDK with an OAuth provider (mcp-remote,
// the Inspector, OpenCode, Gemini CLI) start OAuth on any 401, whatever its
// error: they look for RFC 9728 protected-resource metadata at
// /.well-known/oauth-protected-resource[/mcp], and finding none take the
// server's origin for the authorization server (/.well-known/oauth-
// authorization-server, /.well-known/openid-configuration, then POST
// /register for dynamic client registration). Nothing the 401 carries stops
// that. So the endpoint publishes no protected-resource metadata (RFC 9728
// makes it optional, and any it published would have to name an
// authorization server that does not exist) and answers those paths 404, as
// before, but with an RFC 7591-shaped error body whose error_description
// says that raspi-mcp does not use OAuth and how to make and send a token:
// the SDK's registration error carries that body (mcp-remote 0.15: "Dynamic
// Client Registration rejected (HTTP 404): {…}"), and the discovery steps
// before it go on past a 404 exactly as they did. The reason for refusing
// the token itself cannot ride along: those requests carry no token.

// tokenFix is what to do about a missing or refused token.
const tokenFix = "make a token on the device (raspi-mcp token create NAME --role read|operate|admin, with sudo on a Pi; " +
	"raspi-mcp token list shows which have expired) and send it as the HTTP header 'Authorization: Bearer SECRET'"

// challengeFix is tokenFix for a WWW-Authenticate error_description, which
// may hold neither '"' nor a backslash (RFC 6750 §3).
const challengeFix = "make one on the device with raspi-mcp token create"

// noOAuthText is the error_description of the OAuth paths.
const noOAuthText = "raspi-mcp does not use OAuth, there is nothing to sign in to or register: " + tokenFix

// deniedBody is the body of a refusal: why, and for a 401 the fix.
func deniedBody(status int, why string) string {
	if status == http.StatusUnauthorized {
		return "raspi-mcp: " + why + ": " + tokenFix
	}
	return "raspi-mcp: " + why
}

// isOAuthPath says whether path is one an OAuth client probes or posts to
// when an MCP server answers 401: RFC 9728 and RFC 8414 metadata (at the
// root, path-aware, or OpenID's appended form) and the endpoints the TS
// SDK assumes at the server's origin when it finds no metadata.
func isOAuthPath(path string) bool {
	for _, p := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-authorization-server",
		"/.well-known/openid-configuration", "/mcp/.well-known/openid-configuration"} {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	switch path {
	case "/register", "/authorize", "/token":
		return true
	}
	return false
}

// notFound answers every path but /mcp and /metrics: 404, and on the OAuth
// paths an OAuth-shaped error that says raspi-mcp does not use OAuth.
func notFound(w http.ResponseWriter, r *http.Request) {
	if !isOAuthPath(r.URL.Path) {
		http.NotFound(w, r)
		return
	}
	b, _ := json.Marshal(map[string]string{"error": "invalid_request", "error_description": noOAuthText})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNotFound)
	_, _ = w.Write(append(b, '\n'))
}
