package agent

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"time"

	"github.com/raspi-mcp/raspi-mcp/agent/store"
	"github.com/raspi-mcp/raspi-mcp/agent/tool"
	"github.com/raspi-mcp/raspi-mcp/agent/transport"
)

// The doors (the socket's sessions and the HTTP front) live in
// agent/transport; what follows is the agent's side of them: the audit of
// what they refuse, and the API the binary and the tests already use.

// TokenVerifier checks a bearer secret and says whose it is
// (transport.TokenVerifier).
type TokenVerifier = transport.TokenVerifier

// HTTPOptions are what the HTTP endpoint needs beyond the agent's config
// (transport.HTTPOptions).
type HTTPOptions = transport.HTTPOptions

// httpStatus is the endpoint as `raspi-mcp status` shows it.
type httpStatus = transport.HTTPStatus

// socketLoad is what the sessions hold of the agent now (transport.Load).
type socketLoad = transport.Load

// auditDoor records a refusal or cut the doors decided, as a deny.
func (a *Agent) auditDoor(r transport.Refusal) {
	rec := store.AuditRecord{Time: time.Now().UTC(), CorrelationID: tool.NewCorrelationID(), Principal: r.Principal, Role: r.Role,
		Tool: r.Tool, Decision: store.DecisionDeny, ErrorCode: r.Code, Message: r.Message, Remote: r.Remote}
	rec.InHash, _ = store.HashJSON(r.In)
	if _, err := a.appendAudit(rec); err != nil {
		a.log.Error("audit append failed", "tool", r.Tool, "err", err)
	}
}

// SocketLoad reports what the sessions hold of the agent now; tests and
// measurements read it.
func (a *Agent) SocketLoad() socketLoad { return a.doors.Load() }

// httpHandler is the endpoint: /mcp and /metrics behind the LAN guards.
func (a *Agent) httpHandler(o HTTPOptions) http.Handler { return a.doors.HTTPHandler(o) }

// httpTLS is the endpoint's TLS configuration: nil without [http] tls;
// the owner's certificate, or the self-signed one beside the state file.
// fingerprint is the certificate's, for status and clients to pin.
func (a *Agent) httpTLS(now time.Time) (cfg *tls.Config, fingerprint string, err error) {
	return a.doors.HTTPTLS(now)
}

// ServeHTTPEndpoint serves the HTTP endpoint on ln until ctx ends. It
// refuses a listener reachable from the network without TLS unless the
// owner set insecure_plaintext, also when systemd made the listener.
func (a *Agent) ServeHTTPEndpoint(ctx context.Context, ln net.Listener, o HTTPOptions) error {
	return a.doors.ServeHTTPEndpoint(ctx, ln, o)
}
