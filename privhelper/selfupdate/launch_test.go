package selfupdate

import (
	"context"
	"slices"
	"testing"

	"github.com/raspi-mcp/raspi-mcp/hw/units"
)

func TestUnitLaunchesTheUpdaterByRunID(t *testing.T) {
	got := make(chan []string, 1)
	tr := &units.SimTransient{Programs: map[string]units.SimProgram{
		"/usr/bin/raspi-mcp-helper": func(_ context.Context, argv, _ []string) int { got <- argv; return 0 },
	}}
	u := Unit{Runner: tr, Argv: []string{"/usr/bin/raspi-mcp-helper", "self-update", "--config", "/etc/raspi-mcp/config.toml"}}
	ctx := context.Background()
	name, err := u.Launch(ctx, "job-1a2b")
	if err != nil || name != "raspi-mcp-selfupdate-job-1a2b.service" {
		t.Fatalf("launch: %q %v", name, err)
	}
	st, err := tr.Wait(ctx, name)
	if err != nil || !st.OK() {
		t.Fatalf("run: %+v %v", st, err)
	}
	want := []string{"/usr/bin/raspi-mcp-helper", "self-update", "--config", "/etc/raspi-mcp/config.toml", "--id", "job-1a2b"}
	if argv := <-got; !slices.Equal(argv, want) {
		t.Fatalf("argv %q, want %q", argv, want)
	}
	// Once collected, the name is free again; while a run's unit is
	// loaded, a second updater for the same run is refused by systemd's
	// own rule of one unit per name.
	if _, err := u.Launch(ctx, "job-1a2b"); err != nil {
		t.Fatalf("after the run was collected: %v", err)
	}
	<-got
	if _, err := u.Launch(ctx, "job-1a2b"); err == nil {
		t.Fatal("two updaters for one run")
	}
}
