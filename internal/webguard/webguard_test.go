package webguard

import (
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestGuardHostAndOrigin(t *testing.T) {
	var refused []int
	g := &Guard{Names: []string{"pi.local", "192.168.1.20"}, MaxBody: 16, Refused: func(_ *http.Request, status int, _ string) { refused = append(refused, status) }}
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
		}
	})
	h := g.Wrap(ok)
	for _, c := range []struct {
		host, origin, body string
		want               int
	}{
		{"127.0.0.1:8765", "", "", 200},
		{"localhost", "http://localhost:3000", "", 200},
		{"[::1]:8765", "", "", 200},
		{"app.localhost", "", "", 200},
		{"PI.local:8765", "https://pi.local", "", 200},
		{"192.168.1.20:8765", "", "", 200},
		{"10.0.0.5:8765", "http://10.0.0.5:8765", "", 200},
		{"10.0.0.6:8765", "", "", 403},
		{"evil.example", "", "", 403},
		{"pi.local.evil.example", "", "", 403},
		{"pi.local", "http://evil.example", "", 403},
		{"pi.local", "null", "", 403},
		{"127.0.0.1", "", strings.Repeat("x", 17), 413},
		{"127.0.0.1", "", strings.Repeat("x", 16), 200},
	} {
		req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(c.body))
		req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, &net.TCPAddr{IP: net.IPv4(10, 0, 0, 5), Port: 8765}))
		req.Host = c.host
		if c.origin != "" {
			req.Header.Set("Origin", c.origin)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != c.want {
			t.Errorf("Host %q Origin %q body %d: %d, want %d", c.host, c.origin, len(c.body), w.Code, c.want)
		}
	}
	if len(refused) != 6 {
		t.Errorf("refusals reported: %v, want 6", refused)
	}
}

// A body without a length is cut while read, and the cut reported once.
func TestGuardChunkedBody(t *testing.T) {
	reported := 0
	g := &Guard{MaxBody: 8, Refused: func(*http.Request, int, string) { reported++ }}
	var readErr error
	h := g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, readErr = io.ReadAll(r.Body)
		_, _ = r.Body.Read(make([]byte, 1))
	}))
	req := httptest.NewRequest(http.MethodPost, "/mcp", io.MultiReader(strings.NewReader(strings.Repeat("y", 100))))
	req.ContentLength, req.Host = -1, "127.0.0.1"
	h.ServeHTTP(httptest.NewRecorder(), req)
	var mbe *http.MaxBytesError
	if readErr == nil || !errorsAs(readErr, &mbe) || reported != 1 {
		t.Fatalf("read error %v, reported %d", readErr, reported)
	}
}

func TestLimiter(t *testing.T) {
	l := NewLimiter(0.5, 2)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 2 {
		if ok, _ := l.Allow("a", now); !ok {
			t.Fatalf("request %d of the burst refused", i)
		}
	}
	ok, after := l.Allow("a", now)
	if ok || after != 2*time.Second {
		t.Fatalf("over the burst: ok %v, retry after %v; want refused, 2s", ok, after)
	}
	if ok, _ := l.Allow("b", now); !ok {
		t.Fatal("another key shares the first one's bucket")
	}
	if ok, _ := l.Allow("a", now.Add(2*time.Second)); !ok {
		t.Fatal("not refilled after Retry-After")
	}
}

func TestLimiterBoundsKeys(t *testing.T) {
	l := NewLimiter(1, 1)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range maxKeys + 10 {
		l.Allow(strings.Repeat("k", 1+i%7)+string(rune('a'+i%26))+time.Duration(i).String(), now.Add(time.Duration(i)*time.Second))
	}
	if len(l.keys) > maxKeys {
		t.Fatalf("%d buckets kept, at most %d", len(l.keys), maxKeys)
	}
}

func TestBursts(t *testing.T) {
	b := &Bursts{Window: time.Minute}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	type step struct {
		key     string
		at      time.Duration
		record  bool
		leftOut int
	}
	for i, s := range []step{
		{"x", 0, true, 0},
		{"x", time.Second, false, 0},
		{"y", time.Second, true, 0},
		{"x", 30 * time.Second, false, 0},
		{"x", 61 * time.Second, true, 2},
		{"x", 62 * time.Second, false, 0},
		{"x", 200 * time.Second, true, 1},
		{"x", 300 * time.Second, true, 0},
	} {
		rec, left := b.First(s.key, now.Add(s.at))
		if rec != s.record || left != s.leftOut {
			t.Errorf("step %d (%s at %v): record %v left out %d, want %v %d", i, s.key, s.at, rec, left, s.record, s.leftOut)
		}
	}
}

// A flood from many keys at once is recorded once a window, not per key:
// past maxKeys they share one, and without a total cap that is all.
func TestBurstsManyKeys(t *testing.T) {
	b := &Bursts{Window: time.Minute, Max: -1}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	records := 0
	for i := range 3 * maxKeys {
		if rec, _ := b.First(time.Duration(i).String(), now); rec {
			records++
		}
	}
	if records != maxKeys+1 {
		t.Fatalf("%d records for %d keys in one window, want %d", records, 3*maxKeys, maxKeys+1)
	}
}

// The total cap: however many keys, at most Max records a window; a key
// left out by it is recorded in a later window with its count and sources.
func TestBurstsTotalCap(t *testing.T) {
	b := &Bursts{Window: time.Minute}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	records := 0
	for i := range 3 * maxKeys {
		if rec, _ := b.First(time.Duration(i).String(), now); rec {
			records++
		}
	}
	if records != DefaultMaxRecords {
		t.Fatalf("%d records for %d keys in one window, want the default cap %d", records, 3*maxKeys, DefaultMaxRecords)
	}
	b = &Bursts{Window: time.Minute, Max: 2}
	for i, k := range []string{"a", "b", "c", "c", "c"} {
		v := b.Check(k, fmt.Sprint("10.0.0.", i), now)
		if v.Record != (i < 2) {
			t.Fatalf("refusal %d of %s: record %v", i, k, v.Record)
		}
	}
	// The next window: c is due at once, carrying what the cap left out.
	v := b.Check("c", "10.0.0.9", now.Add(time.Minute))
	if !v.Record || v.LeftOut != 3 || v.Sources != 3 || v.SourcesCapped {
		t.Fatalf("c in the next window: %+v, want recorded with 3 left out from 3 sources", v)
	}
	// Sources are bounded, and say so.
	b = &Bursts{Window: time.Minute}
	b.Check("k", "x", now)
	for i := range 1000 {
		b.Check("k", fmt.Sprint(i), now)
	}
	if v := b.Check("k", "y", now.Add(time.Minute)); v.LeftOut != 1000 || v.Sources != maxSources || !v.SourcesCapped {
		t.Fatalf("1000 sources left out: %+v", v)
	}
}

// The certificate is made once, 0600, and the same one is loaded after.
func TestSelfSigned(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c1, err := SelfSigned(dir, []string{"pi.local", "192.168.1.20"}, now)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{CertFile, KeyFile} {
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v", f, fi, err)
		}
	}
	c2, err := SelfSigned(dir, nil, now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if Fingerprint(c1.Certificate[0]) != Fingerprint(c2.Certificate[0]) {
		t.Fatal("a second start made a new certificate")
	}
	x, err := x509.ParseCertificate(c1.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"pi.local", "localhost", "127.0.0.1", "192.168.1.20"} {
		if err := x.VerifyHostname(h); err != nil {
			t.Errorf("certificate not valid for %s: %v", h, err)
		}
	}
	if fp := Fingerprint(c1.Certificate[0]); !strings.HasPrefix(fp, "sha256:") || len(fp) != len("sha256:")+64 {
		t.Fatalf("fingerprint %q", fp)
	}
}

// A batch takes its calls all or none; one over the burst never fits.
func TestLimiterAllowN(t *testing.T) {
	l := NewLimiter(1, 40)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if ok, _ := l.AllowN("k", 30, now); !ok {
		t.Fatal("30 of a burst of 40 refused")
	}
	if ok, after := l.AllowN("k", 11, now); ok || after != time.Second {
		t.Fatalf("11 more: ok %v, retry after %v; want refused, 1s", ok, after)
	}
	if ok, _ := l.AllowN("k", 10, now); !ok {
		t.Fatal("a refused batch took some of the budget")
	}
	if ok, after := l.AllowN("j", 41, now); ok || after != 0 {
		t.Fatalf("41 over a burst of 40: ok %v, retry after %v; want never", ok, after)
	}
}

// The zero Bursts is ready: a minute's window, not a record a call.
func TestBurstsZeroValue(t *testing.T) {
	var b Bursts
	now := time.Unix(1000, 0)
	if ok, _ := b.First("k", now); !ok {
		t.Fatal("the first refusal is not recorded")
	}
	if ok, _ := b.First("k", now.Add(30*time.Second)); ok {
		t.Fatal("a second refusal within the default window is recorded")
	}
	if ok, n := b.First("k", now.Add(61*time.Second)); !ok || n != 1 {
		t.Fatalf("after the window: record %v, left out %d; want true, 1", ok, n)
	}
}
