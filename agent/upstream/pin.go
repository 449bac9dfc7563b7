package upstream

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// fingerprintPrefix starts a certificate fingerprint, in the form
// `raspi-mcp status` prints for the agent's own HTTP endpoint.
const fingerprintPrefix = "sha256:"

// fingerprint is the SHA-256 of a certificate's DER bytes, as "sha256:" and
// lowercase hex.
func fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	return fingerprintPrefix + hex.EncodeToString(sum[:])
}

// validFingerprint accepts only the canonical form (config normalises what
// the owner wrote), so comparing strings compares certificates.
func validFingerprint(s string) bool {
	h, ok := strings.CutPrefix(s, fingerprintPrefix)
	if !ok || len(h) != 2*sha256.Size || strings.ToLower(h) != h {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil
}

// pinError is a handshake refused because the server's certificate is not
// the pinned one.
type pinError struct {
	want, got string
}

func (e *pinError) Error() string {
	if e.got == "" {
		return fmt.Sprintf("TLS: the server presented no certificate; tls_fingerprint pins %s", e.want)
	}
	return fmt.Sprintf("TLS: the server's certificate is %s, but tls_fingerprint pins %s; if the upstream's certificate was replaced on purpose, pin the new fingerprint from its raspi-mcp status",
		e.got, e.want)
}

// pinnedTLS accepts exactly the pinned certificate. The chain and name
// checks are switched off because the pin replaces them: the handshake
// still makes the server prove it holds that certificate's key, which is a
// stronger identity than a chain or a name, and a device's self-signed
// certificate has no chain to check and need not name the host the URL
// uses. VerifyConnection
// still runs on every handshake, resumed ones included, and a refusal there
// aborts the handshake before any request is written. The refusal is
// recorded so the connect error names both fingerprints instead of the
// SDK's generic failure.
func (c *Client) pinnedTLS(rec *recorder) *tls.Config {
	want := c.o.TLSFingerprint
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: true, // replaced by VerifyConnection's pin check
		VerifyConnection: func(cs tls.ConnectionState) error {
			var got string
			if len(cs.PeerCertificates) > 0 {
				got = fingerprint(cs.PeerCertificates[0].Raw)
			}
			if got != "" && got == want {
				return nil
			}
			err := &pinError{want: want, got: got}
			rec.notePolicy(err)
			return err
		},
	}
}

// untrustedError is a certificate the system roots (or its names) refused
// on an upstream without a pin. It names the certificate's fingerprint, so
// the owner can compare it with the one the device's status prints and pin
// it; trusting it unchecked would trust whoever answered this time.
type untrustedError struct {
	got string
	err error
}

func (e *untrustedError) Error() string {
	return fmt.Sprintf("TLS: the server's certificate %s was refused (%v); if it is the upstream's self-signed certificate, check it against the fingerprint its raspi-mcp status prints and pin it with tls_fingerprint",
		e.got, e.err)
}

func (e *untrustedError) Unwrap() error { return e.err }

// noteUntrusted records a refused certificate from a round trip's error.
func noteUntrusted(rec *recorder, err error) {
	var cve *tls.CertificateVerificationError
	if errors.As(err, &cve) && len(cve.UnverifiedCertificates) > 0 {
		rec.notePolicy(&untrustedError{got: fingerprint(cve.UnverifiedCertificates[0].Raw), err: cve.Err})
	}
}
