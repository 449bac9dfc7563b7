package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"

	"github.com/coreos/go-systemd/v22/activation"

	"github.com/raspi-mcp/raspi-mcp/agent"
	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/internal/bearer"
)

// tokenVerifier is the HTTP endpoint's token check: the token file that
// `raspi-mcp token` keeps; nil without one, and every request is refused.
func tokenVerifier(path string) agent.TokenVerifier {
	if path == "" {
		return nil
	}
	return &bearer.File{Path: path}
}

// httpListener is the HTTP endpoint's socket: the one systemd hands over
// (raspi-mcp-http.socket, FileDescriptorName=http), so the port belongs to
// the unit's configuration and the agent never binds; else [http] listen;
// else none.
func httpListener(listen string) (net.Listener, error) {
	named, err := activation.ListenersWithNames()
	if err != nil {
		return nil, fmt.Errorf("http: systemd sockets: %w", err)
	}
	if lns := named["http"]; len(lns) > 0 {
		for _, extra := range lns[1:] {
			extra.Close()
		}
		return lns[0], nil
	}
	if listen == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("http.listen: %w", err)
	}
	return ln, nil
}

// serveHTTP starts the HTTP endpoint on ln unless it is nil, and
// in laptop mode prints its URL; done yields its end (nil: a clean stop). A
// failing endpoint stops the agent: an owner who configured it should
// learn at once, not from a client.
func serveHTTP(ctx context.Context, stop func(), a *agent.Agent, cfg config.Config, ln net.Listener, log *slog.Logger, out io.Writer) <-chan error {
	done := make(chan error, 1)
	if ln == nil {
		done <- nil
		return done
	}
	if out != nil {
		scheme := "http"
		if cfg.HTTP.TLS {
			scheme = "https"
		}
		fmt.Fprintf(out, "MCP over HTTP: %s://%s/mcp (Authorization: Bearer TOKEN)\n", scheme, ln.Addr())
	}
	go func() {
		err := a.ServeHTTPEndpoint(ctx, ln, agent.HTTPOptions{Tokens: tokenVerifier(cfg.HTTP.Tokens), Metrics: a.MetricsHandler()})
		if err != nil {
			log.Error("http endpoint stopped; stopping the agent", "err", err)
			stop()
		}
		done <- err
	}()
	return done
}
