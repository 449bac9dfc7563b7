package agent

import (
	"math"
	"testing"
	"time"

	"github.com/raspi-mcp/raspi-mcp/agent/store"
	"github.com/raspi-mcp/raspi-mcp/config"
)

// A null for an optional parameter means "not given", as the tool catalog's
// nullable parameters let clients send it; a null for a required one is still
// refused by name.
func TestNullMeansNotGiven(t *testing.T) {
	r := newRig(t, func(c *config.Config) { c.Metrics.DefaultJob = false })
	t0 := time.Now().UTC().Add(-10 * time.Minute).Truncate(time.Second)
	putSeries(t, r, []store.Sample{{Time: t0, CPUPercent: 5, TempC: float32(math.NaN()), MemTotal: 100, MemUsed: 50}})

	res, sc := r.as(admin, "metrics_get_samples", map[string]any{"job_id": nil, "since": nil, "until": nil, "limit": nil})
	if res.IsError || sc["returned_count"].(float64) != 1 || sc["job_id"] != "job-hand" {
		t.Fatalf("get_samples with nulls: %v", sc)
	}
	res, sc = r.as(operator, "gpio_write_pin", map[string]any{"pin": 17, "value": "high", "duration_ms": nil})
	if res.IsError || level17(t, r) != 1 {
		t.Fatalf("write_pin with duration_ms null: %v", sc)
	}
	if leases, _ := r.db.ListGPIOReverts(); len(leases) != 0 {
		t.Fatalf("null duration_ms made a lease: %v", leases)
	}
	// Nested objects too.
	if res, sc := r.as(admin, "process_list_processes", map[string]any{"filter": map[string]any{"username": nil, "status": nil}, "limit": nil}); res.IsError {
		t.Fatalf("process filter with nulls: %v", sc)
	}
	// Under an older name too.
	if res, sc := r.as(admin, "metrics_query_history", map[string]any{"metrics": []string{"cpu_percent"}, "start": nil, "end_time": nil}); res.IsError {
		t.Fatalf("query_history with nulls: %v", sc)
	}
	// Required parameters stay required.
	res, sc = r.as(operator, "gpio_write_pin", map[string]any{"pin": nil, "value": "high"})
	if errCode(res, sc) != CodeInvalidArgument || sc["error"].(map[string]any)["details"].(map[string]any)["parameter"] != "pin" {
		t.Fatalf("null pin: %v", sc)
	}
}

func TestI2CWriteRegisterNull(t *testing.T) {
	r := newRig(t, func(c *config.Config) { c.I2C.Write = []string{"1:0x50"} })
	w := map[string]any{"bus": 1, "address": 0x50, "register": nil, "data": []int{0x10, 7}, "confirm": true, "reason": "set pointer, write"}
	if res, sc := r.as(operator, "i2c_write", w); res.IsError || sc["bytes_written"].(float64) != 2 {
		t.Fatalf("write with register null: %v", sc)
	}
	_, sc := r.as(operator, "i2c_read", map[string]any{"bus": 1, "address": 0x50, "register": 0x10, "length": 1})
	if sc["data"].([]any)[0].(float64) != 7 {
		t.Fatalf("read back: %v", sc)
	}
}
