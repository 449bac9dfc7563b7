package upstream

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"log/slog"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"
)

// selfSigned makes a certificate like the one a device generates for its
// HTTP endpoint: self-signed, for garage.local and the addresses ips. With
// no ips neither the system roots nor the name check accept it for
// 127.0.0.1.
func selfSigned(t *testing.T, ips ...net.IP) (*tls.Certificate, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(now.UnixNano()),
		Subject:      pkix.Name{CommonName: "raspi-mcp garage"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"garage.local"},
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, fingerprint(der)
}

// A pinned certificate is the identity: a self-signed certificate that
// names another host carries a whole MCP session, token included.
func TestPinnedFingerprint(t *testing.T) {
	leakCheck(t)
	const token = "garage-token-for-hallway"
	cert, fp := selfSigned(t)
	h := startHTTPFake(t, "streamable", fakeConfig{token: token, cert: cert})
	c := newTestClient(t, Options{URL: h.URL(), TLSFingerprint: fp,
		Token: func() (string, error) { return token, nil }})
	runClient(t, c)
	waitUp(t, c)
	res, err := c.Call(context.Background(), "read", map[string]any{"q": "pinned"}, CallOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := resultText(res); got != "read:pinned" {
		t.Errorf("call over the pinned connection = %q", got)
	}
	if h.auths.Load() == 0 {
		t.Error("the token was not sent over the pinned connection")
	}
}

// A wrong pin stops the connection in the TLS handshake: the server sees
// no request and no token, and the upstream is unavailable with an error
// (in Status, the log and the call's answer) naming both fingerprints.
func TestPinMismatch(t *testing.T) {
	leakCheck(t)
	cert, got := selfSigned(t)
	_, want := selfSigned(t)
	h := startHTTPFake(t, "streamable", fakeConfig{token: "t", cert: cert})
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	c := newTestClient(t, Options{URL: h.URL(), TLSFingerprint: want, Logger: logger, MinBackoff: time.Hour,
		Token: func() (string, error) { return "t", nil }})
	runClient(t, c)
	eventually(t, "connect failure", func() bool { return c.Status().State == StateDown })
	st := c.Status()
	for _, where := range []string{st.LastError, logs.String()} {
		if !strings.Contains(where, "certificate is "+got) || !strings.Contains(where, "tls_fingerprint pins "+want) {
			t.Errorf("want both fingerprints (seen %s, pinned %s) in %q", got, want, where)
		}
	}
	_, err := c.Call(context.Background(), "write", nil, CallOptions{})
	if e := asError(t, err); e.Kind != Unavailable || e.MayHaveRun || !strings.Contains(err.Error(), want) {
		t.Errorf("call error = %v", err)
	}
	// The client did reach the server and gave up in the handshake.
	eventually(t, "the server's handshake error", func() bool {
		return strings.Contains(h.serverLog.String(), "TLS handshake error")
	})
	if n, a := h.requests.Load(), h.auths.Load(); n != 0 || a != 0 {
		t.Errorf("server saw %d requests, %d with Authorization; want none", n, a)
	}
}

// Without a pin the system roots and the names decide, and a device's
// self-signed certificate is refused before any request, with its
// fingerprint and the way to pin it in the error.
func TestSelfSignedWithoutPin(t *testing.T) {
	leakCheck(t)
	for _, tc := range []struct {
		name string
		ips  []net.IP
		want string
	}{
		// The x509 wording depends on whether the host has system roots at all.
		{"unknown authority", []net.IP{net.IPv4(127, 0, 0, 1)}, "x509: "},
		{"other names", nil, "doesn't contain any IP SANs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cert, fp := selfSigned(t, tc.ips...)
			h := startHTTPFake(t, "streamable", fakeConfig{token: "t", cert: cert})
			c := newTestClient(t, Options{URL: h.URL(), MinBackoff: time.Hour,
				Token: func() (string, error) { return "t", nil }})
			runClient(t, c)
			eventually(t, "connect failure", func() bool { return c.Status().State == StateDown })
			st := c.Status()
			for _, part := range []string{tc.want, "certificate " + fp + " was refused", "pin it with tls_fingerprint"} {
				if !strings.Contains(st.LastError, part) {
					t.Errorf("LastError = %q; want %q in it", st.LastError, part)
				}
			}
			eventually(t, "the server's handshake error", func() bool {
				return strings.Contains(h.serverLog.String(), "TLS handshake error")
			})
			if n, a := h.requests.Load(), h.auths.Load(); n != 0 || a != 0 {
				t.Errorf("server saw %d requests, %d with Authorization; want none", n, a)
			}
		})
	}
}

func TestPinValidate(t *testing.T) {
	_, fp := selfSigned(t)
	if err := (Options{URL: "https://garage.local:8443/mcp", TLSFingerprint: fp}).Validate(); err != nil {
		t.Errorf("Validate = %v", err)
	}
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{URL: "http://garage.local:8443/mcp", TLSFingerprint: fp}, "tls_fingerprint: only with an https url"},
		{Options{Command: []string{"/bin/x"}, TLSFingerprint: fp}, "tls_fingerprint: only with an https url"},
		{Options{URL: "https://garage.local/mcp", TLSFingerprint: strings.ToUpper(fp)}, `tls_fingerprint: want "sha256:"`},
		{Options{URL: "https://garage.local/mcp", TLSFingerprint: fp[:len(fp)-2]}, `tls_fingerprint: want "sha256:"`},
		{Options{URL: "https://garage.local/mcp", TLSFingerprint: strings.TrimPrefix(fp, "sha256:")}, `tls_fingerprint: want "sha256:"`},
		{Options{URL: "https://garage.local/mcp", TLSFingerprint: fp[:len(fp)-1] + "z"}, `tls_fingerprint: want "sha256:"`},
	} {
		if err := tc.o.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%+v) = %v, want %q", tc.o, err, tc.want)
		}
	}
}
