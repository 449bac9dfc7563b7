// Package webguard keeps an HTTP endpoint on a LAN safe before any request
// reaches the application: it refuses requests whose Host or Origin name a
// host the owner did not configure (so a web page cannot reach the device
// by rebinding its own DNS name to the device's address), bodies over a
// cap, and callers over their rate, and it makes the self-signed TLS
// certificate. Every refusal is reported to a callback; Bursts lets that
// callback record a flood once instead of once per request.
package webguard

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// Guard checks every request before its handler sees it.
type Guard struct {
	// Names are the host names (without port) requests may address, beside
	// the loopback names, which are always accepted.
	Names []string
	// MaxBody caps a request's body in bytes; 0: no cap.
	MaxBody int64
	// Refused is told of every refusal after the answer is written; nil:
	// nobody is told.
	Refused func(r *http.Request, status int, why string)
}

// Wrap returns next behind the guard.
func (g *Guard) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !g.allowedHost(r, hostOnly(r.Host)) {
			g.refuse(w, r, http.StatusForbidden, fmt.Sprintf("Host %q is not a name of this device (http.names)", r.Host))
			return
		}
		if o := r.Header.Get("Origin"); o != "" {
			u, err := url.Parse(o)
			if err != nil || u.Host == "" || !g.allowedHost(r, hostOnly(u.Host)) {
				g.refuse(w, r, http.StatusForbidden, fmt.Sprintf("Origin %q is not a name of this device (http.names)", o))
				return
			}
		}
		if g.MaxBody > 0 && r.Body != nil && r.Body != http.NoBody {
			if r.ContentLength > g.MaxBody {
				g.refuse(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body of %d bytes is over the cap of %d (http.max_body_bytes)", r.ContentLength, g.MaxBody))
				return
			}
			// A chunked body has no length up front: it is cut while read,
			// and the refusal reported then.
			r.Body = &capped{ReadCloser: http.MaxBytesReader(w, r.Body, g.MaxBody), over: func() {
				if g.Refused != nil {
					g.Refused(r, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body over the cap of %d bytes (http.max_body_bytes)", g.MaxBody))
				}
			}}
		}
		next.ServeHTTP(w, r)
	})
}

func (g *Guard) refuse(w http.ResponseWriter, r *http.Request, status int, why string) {
	http.Error(w, why, status)
	if g.Refused != nil {
		g.Refused(r, status, why)
	}
}

// allowedHost accepts loopback names and addresses, the configured names,
// and the address the request came in on: a rebinding page always sends its
// own name, never the device's address.
func (g *Guard) allowedHost(r *http.Request, h string) bool {
	if IsLoopbackHost(h) {
		return true
	}
	if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if ip := net.ParseIP(strings.Trim(h, "[]")); ip != nil {
			if host, _, err := net.SplitHostPort(local.String()); err == nil && ip.Equal(net.ParseIP(host)) {
				return true
			}
		}
	}
	for _, n := range g.Names {
		if strings.EqualFold(n, h) {
			return true
		}
	}
	return false
}

// IsLoopbackHost reports whether h (no port) names this machine only:
// localhost, a name under .localhost, or a loopback address.
func IsLoopbackHost(h string) bool {
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(h, "[]"))
	return ip != nil && ip.IsLoopback()
}

// hostOnly drops the port of a Host header value.
func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return strings.Trim(hostport, "[]")
}

// capped reports the first read that hits the body cap.
type capped struct {
	io.ReadCloser
	over     func()
	reported bool
}

func (c *capped) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	var mbe *http.MaxBytesError
	if err != nil && !c.reported && errors.As(err, &mbe) {
		c.reported = true
		c.over()
	}
	return n, err
}
