package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A real Prometheus (the Debian package's, 2.42 in CI) scrapes the agent on
// the simulated board over loopback every second; after a denied call, a
// PromQL query through its HTTP API finds the board's temperature and the
// denial. Prometheus runs on its own port, config and data directory, so a
// packaged prometheus service on this machine neither interferes nor is
// touched.
func TestRealPrometheusScrapes(t *testing.T) {
	t.Parallel() // it mostly waits (a timeout, a scrape): beside the others
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("prometheus not installed (Debian package prometheus)")
	}
	if testing.Short() {
		t.Skip("starts a Prometheus server")
	}
	r := newSimRig(t, nil)
	cs := r.serve() // runs the agent as served: helper watch, sampler
	target := httptest.NewServer(r.a.MetricsHandler())
	t.Cleanup(target.Close)

	port := freePort(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: raspi-mcp
    static_configs:
      - targets: [%q]
`, target.Listener.Addr().String()), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address=127.0.0.1:"+strconv.Itoa(port), "--log.level=warn")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus log:\n%s", logs.String())
		}
	})

	// A denied call over MCP: a reboot without confirm and reason.
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "system_reboot", Arguments: map[string]any{"delay_seconds": 300}})
	if err != nil || !res.IsError {
		t.Fatalf("reboot without confirm was not refused: %v %v", res, err)
	}

	api := "http://127.0.0.1:" + strconv.Itoa(port) + "/api/v1/query?query="
	query := func(q string) (float64, bool) {
		resp, err := http.Get(api + url.QueryEscape(q))
		if err != nil {
			return 0, false // not up yet
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var out struct {
			Status string `json:"status"`
			Data   struct {
				Result []struct {
					Value [2]any `json:"value"`
				} `json:"result"`
			} `json:"data"`
		}
		if json.Unmarshal(body, &out) != nil || out.Status != "success" || len(out.Data.Result) != 1 {
			return 0, false
		}
		s, _ := out.Data.Result[0].Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		return v, err == nil
	}
	var temp, denials, helperUp float64
	waitFor(t, "Prometheus to have scraped the temperature and the denial", 2*hangGuard, func() bool {
		if cmd.ProcessState != nil {
			t.Fatalf("prometheus exited: %v", cmd.ProcessState)
		}
		var ok1, ok2, ok3 bool
		temp, ok1 = query(`raspi_temperature_celsius{job="raspi-mcp"}`)
		denials, ok2 = query(`raspi_mcp_tool_calls_total{job="raspi-mcp",tool="system.reboot",decision="deny"}`)
		helperUp, ok3 = query(`raspi_mcp_helper_up{job="raspi-mcp"}`)
		if !ok1 || !ok2 || !ok3 || denials < 1 {
			time.Sleep(200 * time.Millisecond)
			return false
		}
		return true
	})
	if temp < 20 || temp > 90 || denials != 1 || helperUp != 1 {
		t.Fatalf("temperature %v, denials %v, helper up %v", temp, denials, helperUp)
	}
	if up, ok := query(`up{job="raspi-mcp"}`); !ok || up != 1 {
		t.Fatalf("up = %v (%v): Prometheus does not see a healthy target", up, ok)
	}
	// Every query of the packaged dashboard is one this Prometheus runs.
	for _, e := range dashboardExprs(t) {
		resp, err := http.Get(api + url.QueryEscape(e))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("dashboard query %s: %s: %s", e, resp.Status, body)
		}
	}
}

// freePort is a loopback TCP port nobody listens on right now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
