package laptop

import (
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
)

// ParseFingerprint reads a certificate's SHA-256 fingerprint in the form
// `raspi-mcp status` prints ("sha256:" and 64 hex digits) or openssl's
// (`openssl x509 -fingerprint -sha256`: "AB:CD:…", with or without its
// "sha256 Fingerprint=" label), and returns its 32 bytes.
func ParseFingerprint(s string) ([]byte, error) {
	t := strings.TrimSpace(s)
	if i := strings.LastIndex(t, "="); i >= 0 && strings.Contains(strings.ToLower(t[:i]), "fingerprint") {
		t = t[i+1:]
	}
	if len(t) >= 7 && strings.EqualFold(t[:7], "sha256:") {
		t = t[7:]
	}
	if strings.Contains(t, ":") {
		pairs := strings.Split(t, ":")
		for _, p := range pairs {
			if len(p) != 2 {
				return nil, fmt.Errorf("laptop: fingerprint %q: want sha256: and 64 hex digits, as raspi-mcp status prints it, or openssl's AB:CD:… form", s)
			}
		}
		t = strings.Join(pairs, "")
	}
	b, err := hex.DecodeString(t)
	if err != nil || len(b) != sha256.Size {
		return nil, fmt.Errorf("laptop: fingerprint %q: want sha256: and 64 hex digits, as raspi-mcp status prints it, or openssl's AB:CD:… form", s)
	}
	return b, nil
}

// FormatFingerprint is the form `raspi-mcp status` prints.
func FormatFingerprint(b []byte) string { return "sha256:" + hex.EncodeToString(b) }

// PinError is a handshake refused because the server's certificate is not
// the pinned one. Got is "" when it showed none.
type PinError struct{ Want, Got string }

func (e *PinError) Error() string {
	return fmt.Sprintf("laptop: the server's certificate is %s, but this laptop pins %s", orNone(e.Got), e.Want)
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// pin checks the leaf certificate against the pinned fingerprint and
// remembers the last refusal, for the reason the client is shown (the
// error itself reaches us wrapped by net/http and go-sdk).
type pin struct {
	want []byte
	mu   sync.Mutex
	last *PinError
}

// config accepts exactly the pinned certificate. The chain and name checks
// are off because the pin replaces them: the handshake still makes the
// server prove it holds that certificate's key, which identifies the Pi
// better than a chain a self-signed certificate does not have or a name
// the URL may not use. VerifyConnection runs on every handshake, resumed
// ones too, and a refusal aborts it before the token is sent.
func (p *pin) config() *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: true, // replaced by VerifyConnection's pin check
		VerifyConnection: func(cs tls.ConnectionState) error {
			var got []byte
			if len(cs.PeerCertificates) > 0 {
				s := sha256.Sum256(cs.PeerCertificates[0].Raw)
				got = s[:]
				if subtle.ConstantTimeCompare(got, p.want) == 1 {
					return nil
				}
			}
			e := &PinError{Want: FormatFingerprint(p.want)}
			if got != nil {
				e.Got = FormatFingerprint(got)
			}
			p.mu.Lock()
			p.last = e
			p.mu.Unlock()
			return e
		},
	}
}

func (p *pin) refused() *PinError {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}
