package pairing

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Revoked is what the laptop says when the Pi no longer knows the paired
// token: its owner revoked it, or paired the same name again (rotation).
const Revoked = "this pairing was revoked or rotated on the Pi: pair again (on the Pi: sudo raspi-mcp pair NAME --role ROLE; here: raspi-mcp-laptop pair LINE)"

// ExplainRefusal is the reason and the fix for the Pi's answer to a paired
// request that did not succeed, from its status and body (the agent's
// texts, agent/transport: "unknown or revoked token", "token expired",
// ...); "" for a 2xx. The body is the Pi's, not the token: it may be
// quoted.
func ExplainRefusal(status int, body string) string {
	body = strings.TrimSpace(body)
	if len(body) > 300 {
		body = body[:300] + "..."
	}
	switch {
	case status >= 200 && status < 300:
		return ""
	case status == http.StatusUnauthorized && strings.Contains(body, "unknown or revoked token"):
		return Revoked
	case status == http.StatusUnauthorized && strings.Contains(body, "token expired"):
		return "this pairing's token expired on the Pi: pair again (on the Pi: sudo raspi-mcp pair NAME --role ROLE [--expires 90d]; here: raspi-mcp-laptop pair LINE)"
	case status == http.StatusUnauthorized:
		return "the Pi refused the paired token (401: " + body + "): pair again"
	case status == http.StatusForbidden && strings.Contains(body, "is not a name of this device"):
		return "the Pi refuses requests addressed to this pairing's host name (403: " + body + "): add the name to [http] names on the Pi and restart its agent, or pair again with --address set to a name it has"
	case status == http.StatusForbidden:
		return "the Pi refused the paired token's role for MCP (403: " + body + "): pair again with --role read, operate or admin"
	case status == http.StatusTooManyRequests:
		return "the Pi asks to slow down (429: " + body + "): try again in a minute"
	case status == http.StatusServiceUnavailable:
		return "the Pi cannot serve the request now (503: " + body + "); on the Pi: raspi-mcp status"
	}
	return fmt.Sprintf("the Pi answered %d %s: %s", status, http.StatusText(status), body)
}

// ErrFingerprint is the handshake's error when the Pi's certificate is not
// the paired one.
var ErrFingerprint = errors.New("pairing: the Pi's certificate is not the one paired")

// PinnedTLS is a TLS client configuration that accepts exactly the
// certificate whose SHA-256 is fingerprint, and no authority: the Pi's
// certificate is self-signed, and the pairing line carried its
// fingerprint from the Pi itself. The error of a mismatch says both
// fingerprints and that a new certificate needs a new pairing.
func PinnedTLS(fingerprint string) (*tls.Config, error) {
	want, err := CanonicalFingerprint(fingerprint)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		// The chain is not checked against authorities: the pin below is
		// the check, in VerifyConnection, which also runs on resumption.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return fmt.Errorf("%w: it sent none", ErrFingerprint)
			}
			got := certFingerprint(cs.PeerCertificates[0])
			if got != want {
				return fmt.Errorf("%w: it is %s, the pairing has %s (if the Pi's certificate was renewed on purpose, pair again; if not, something is in the way)", ErrFingerprint, got, want)
			}
			return nil
		},
	}, nil
}

func certFingerprint(c *x509.Certificate) string {
	s := sha256.Sum256(c.Raw)
	return "sha256:" + hex.EncodeToString(s[:])
}
