package privhelper_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/hw/units"
	"github.com/raspi-mcp/raspi-mcp/privhelper"
	"github.com/raspi-mcp/raspi-mcp/privhelper/client"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

// slowSystemd is the simulated systemd with a gate in front of its
// changes: a daemon-reload (SetEnabled) or a job (Control) takes exactly
// as long as the test holds the gate, never a fixed time. It records the
// deadline each change got, which is the bound the helper applied.
type slowSystemd struct {
	units.Units
	entered chan time.Duration // time left until the change's deadline, one per change
	release chan struct{}      // closed: changes go through
}

func newSlowSystemd(t *testing.T) *slowSystemd {
	sim, err := units.NewSim(filepath.Join(t.TempDir(), "units.json"))
	if err != nil {
		t.Fatal(err)
	}
	return &slowSystemd{Units: sim, entered: make(chan time.Duration, 8), release: make(chan struct{})}
}

func (s *slowSystemd) wait(ctx context.Context) error {
	left := time.Duration(-1)
	if d, ok := ctx.Deadline(); ok {
		left = time.Until(d)
	}
	s.entered <- left
	select {
	case <-s.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *slowSystemd) SetEnabled(ctx context.Context, name string, enabled bool) (units.EnableResult, error) {
	if err := s.wait(ctx); err != nil {
		return units.EnableResult{}, err
	}
	return s.Units.SetEnabled(ctx, name, enabled)
}

func (s *slowSystemd) Control(ctx context.Context, name, action string) (units.ControlResult, error) {
	if err := s.wait(ctx); err != nil {
		return units.ControlResult{}, err
	}
	return s.Units.Control(ctx, name, action)
}

func (s *slowSystemd) entry(t *testing.T) time.Duration {
	t.Helper()
	select {
	case d := <-s.entered:
		return d
	case <-time.After(hangGuard):
		t.Fatal("the change never reached systemd")
		return 0
	}
}

// A daemon-reload that outlasts the quick bound (here 10 ms, for the
// 8 s that cut service.enable in issue 28) completes: service.enable is
// bounded by the systemd bound, service.control by the job bound. The
// client, whose quick timeout is shorter still, waits for both.
func TestSystemdMethodsOutlastTheQuickBound(t *testing.T) {
	const quick = 10 * time.Millisecond
	sd := newSlowSystemd(t)
	h := startHelperWith(t, sockIn(t), privhelper.Options{Policy: opsPolicy(),
		Ops:            privhelper.Ops{Units: privhelper.UnitsFrom(sd)},
		HandlerTimeout: quick, SystemdTimeout: 5 * time.Minute, JobTimeout: 10 * time.Minute})
	c := client.New(client.Options{Socket: h.sock, DialTimeout: hangGuard / 2, Timeout: quick,
		SystemdTimeout: 5 * time.Minute, JobTimeout: 10 * time.Minute})
	t.Cleanup(func() { c.Close() })

	type result struct {
		resp proto.ServiceEnableResp
		err  error
	}
	done := make(chan result, 1)
	go func() {
		r, err := client.Call(context.Background(), c, proto.ServiceEnable, proto.ServiceEnableReq{Unit: "nginx.service", Enabled: false})
		done <- result{r, err}
	}()
	left := sd.entry(t)
	if left <= 4*time.Minute || left > 5*time.Minute {
		t.Fatalf("service.enable ran with %s left; want the systemd bound, 5m", left)
	}
	// A quick call does not queue behind it: it has its own connection.
	qctx, cancel := context.WithTimeout(context.Background(), hangGuard/2)
	defer cancel()
	if _, err := client.Call(qctx, c, proto.Status, proto.StatusReq{}); err != nil {
		t.Fatalf("status while a daemon-reload is under way: %v", err)
	}
	// The handler's context was made before the change entered systemd:
	// after this wait the quick bound has passed for it, however fast or
	// slow the machine.
	time.Sleep(5 * quick)
	close(sd.release)
	r := <-done
	if r.err != nil || r.resp.After != "disabled" {
		t.Fatalf("service.enable after a slow daemon-reload: %+v %v", r.resp, r.err)
	}

	ctl, err := client.Call(context.Background(), c, proto.ServiceControl, proto.ServiceControlReq{Unit: "nginx.service", Action: "restart"})
	if err != nil || ctl.Job != "done" {
		t.Fatalf("service.control: %+v %v", ctl, err)
	}
	if left := sd.entry(t); left <= 9*time.Minute || left > 10*time.Minute {
		t.Fatalf("service.control ran with %s left; want the job bound, 10m", left)
	}
}

// Over its bound, a systemd method fails with a retryable unavailable
// that names the method and the bound, and says the job may still be
// running in systemd.
func TestSystemdMethodOverItsBoundFailsClearly(t *testing.T) {
	sd := newSlowSystemd(t) // never released
	h := startHelperWith(t, sockIn(t), privhelper.Options{Policy: opsPolicy(),
		Ops:            privhelper.Ops{Units: privhelper.UnitsFrom(sd)},
		SystemdTimeout: 50 * time.Millisecond, JobTimeout: 60 * time.Millisecond})
	c := newClient(t, h.sock)
	_, err := client.Call(context.Background(), c, proto.ServiceEnable, proto.ServiceEnableReq{Unit: "nginx.service", Enabled: true})
	e := protoErr(t, err, proto.CodeUnavailable)
	if !e.Retryable || !strings.Contains(e.Message, "service.enable did not finish within 50ms") || !strings.Contains(e.Message, "systemd methods") ||
		e.Details["method"] != "service.enable" || e.Details["timeout_seconds"] != 0.05 {
		t.Fatalf("timeout error = %+v", e)
	}
	_, err = client.Call(context.Background(), c, proto.ServiceControl, proto.ServiceControlReq{Unit: "nginx.service", Action: "start"})
	e = protoErr(t, err, proto.CodeUnavailable)
	if !strings.Contains(e.Message, "service.control did not finish within 60ms (the helper's bound on job methods)") {
		t.Fatalf("timeout error = %+v", e)
	}
	if h.logs.find(t, "INFO", "request failed") == nil {
		t.Error("the timeout was not logged")
	}
}

// For every method of the table, the client waits at least as long as the
// helper lets it run, plus the margin for a slow one, with the defaults
// and with the bounds the config sets on both sides.
func TestClientOutwaitsTheHelperForEveryMethod(t *testing.T) {
	d := config.Default()
	if d.Helper.SystemdTimeout.D() != proto.DefaultSystemdTimeout || d.Helper.JobTimeout.D() != proto.DefaultJobTimeout {
		t.Fatalf("config defaults %s/%s differ from proto's %s/%s", d.Helper.SystemdTimeout.D(), d.Helper.JobTimeout.D(),
			proto.DefaultSystemdTimeout, proto.DefaultJobTimeout)
	}
	if d.Helper.Timeout.D() <= proto.DefaultQuickTimeout {
		t.Fatalf("helper.timeout %s does not outwait the helper's quick bound %s", d.Helper.Timeout.D(), proto.DefaultQuickTimeout)
	}
	long, err := config.Parse([]byte("[helper]\nsystemd_timeout = \"20m\"\njob_timeout = \"25m\"\ntimeout = \"3s\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]config.Config{"defaults": d, "configured": long} {
		cfg.Helper.AgentUser = "0" // no account lookup: this machine has no raspi-mcp user
		// Both sides built as the binaries build them.
		opts, err := privhelper.OptionsFromConfig(&cfg, privhelper.Backends{})
		if err != nil {
			t.Fatal(err)
		}
		helper := proto.Bounds{Quick: opts.HandlerTimeout, Systemd: opts.SystemdTimeout, Job: opts.JobTimeout}
		c := client.New(client.Options{Socket: "/nonexistent", Timeout: cfg.Helper.Timeout.D(),
			SystemdTimeout: cfg.Helper.SystemdTimeout.D(), JobTimeout: cfg.Helper.JobTimeout.D()})
		for _, m := range proto.Methods() {
			hb, cb := helper.Of(m.Class), c.Timeout(m.Class)
			switch {
			case m.Class == proto.Quick && cb != cfg.Helper.Timeout.D():
				t.Errorf("%s: quick method %s waits %s, not helper.timeout", name, m.Name, cb)
			case m.Class != proto.Quick && cb < hb+proto.ReplyMargin:
				t.Errorf("%s: %s (%s) waits %s on the client, helper bound %s", name, m.Name, m.Class, cb, hb)
			case m.Class != proto.Quick && hb < 10*time.Second:
				t.Errorf("%s: %s (%s) bounded at %s by the helper", name, m.Name, m.Class, hb)
			}
		}
		c.Close()
	}
}
