package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/config"
)

// An https upstream with its own self-signed certificate, the way a Pi
// behind a Pi is mounted: [[upstream]] tls_fingerprint reaches the client,
// so the right pin mounts its tools and a wrong one leaves them
// unavailable with both fingerprints in the status.
func TestLANPinnedTLS(t *testing.T) {
	f := newFakeLAN(t)
	ts := httptest.NewUnstartedServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return f.srv }, nil))
	ts.Config.ErrorLog = log.New(io.Discard, "", 0) // the wrong pin's handshake errors
	ts.StartTLS()
	t.Cleanup(func() { ts.CloseClientConnections(); ts.Close() })
	sum := sha256.Sum256(ts.Certificate().Raw)
	right := "sha256:" + hex.EncodeToString(sum[:])
	wrong := "sha256:" + strings.Repeat("ab", sha256.Size)

	for _, tc := range []struct {
		name, pin string
	}{{"right", "sha256:" + strings.ToUpper(right[7:])}, {"wrong", wrong}} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, func(c *config.Config) {
				c.Upstreams = []config.Upstream{{Name: "garage", URL: ts.URL + "/mcp", TLSFingerprint: tc.pin}}
			})
			r.serve()
			if tc.pin == wrong {
				waitFor(t, "the upstream reported down", 5*time.Second, func() bool { return r.a.lanStatus()[0].State == "down" })
				st := r.a.lanStatus()[0]
				if !strings.Contains(st.LastError, right) || !strings.Contains(st.LastError, wrong) {
					t.Errorf("last error %q; want both fingerprints", st.LastError)
				}
				return
			}
			// Tools are mounted one at a time: wait for the one called.
			waitFor(t, "the upstream's tool", 5*time.Second, func() bool {
				_, ok := r.a.tools.Lookup("garage_devices_get_level")
				return ok
			})
			f.level.Store(7)
			res, sc := r.as(admin, "garage_devices_get_level", map[string]any{})
			if res.IsError || sc["level"] != float64(7) {
				t.Fatalf("call over the pinned connection: %v", sc)
			}
		})
	}
}
