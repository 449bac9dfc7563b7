package units

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/raspi-mcp/raspi-mcp/hw/journal"
)

func TestSimMainProcessesAndExits(t *testing.T) {
	s, _ := newSim(t)
	ctx := context.Background()
	mains, err := s.MainProcesses(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byUnit := map[string]MainProcess{}
	for _, m := range mains {
		byUnit[m.Unit] = m
	}
	ssh, ok := byUnit["ssh.service"]
	if !ok || ssh.Exe != "/usr/sbin/sshd" || ssh.PID == 0 || ssh.Since.IsZero() || ssh.User != "" {
		t.Fatalf("ssh main process: %+v", ssh)
	}
	if m := byUnit["raspi-mcp.service"]; m.User != "raspi-mcp" || !slices.Equal(m.Args, []string{"/usr/local/bin/raspi-mcp", "serve"}) {
		t.Fatalf("raspi-mcp main process: %+v", m)
	}
	if _, ok := byUnit["motion.service"]; ok {
		t.Fatal("an inactive unit has a main process")
	}

	// A stale pid changes nothing.
	if err := s.MainExited(ctx, "ssh.service", ssh.PID+1, "TERM"); err != nil {
		t.Fatal(err)
	}
	if st := states(t, s)["ssh.service"]; st.ActiveState != "active" || st.MainPID != ssh.PID {
		t.Fatalf("ssh after a stale exit: %+v", st)
	}
	// TERM is a clean exit: Restart=on-failure leaves it stopped.
	if err := s.MainExited(ctx, "ssh.service", ssh.PID, "TERM"); err != nil {
		t.Fatal(err)
	}
	if st := states(t, s)["ssh.service"]; st.ActiveState != "inactive" || st.MainPID != 0 || st.Restarts != 0 {
		t.Fatalf("ssh after TERM: %+v", st)
	}
	// KILL is a failure: Restart=on-failure starts it again, at a new pid.
	helper := byUnit["raspi-mcp-helper.service"]
	if err := s.MainExited(ctx, "raspi-mcp-helper.service", helper.PID, "KILL"); err != nil {
		t.Fatal(err)
	}
	st := states(t, s)["raspi-mcp-helper.service"]
	if st.ActiveState != "active" || st.MainPID == 0 || st.MainPID == helper.PID || st.Restarts != 1 {
		t.Fatalf("helper after KILL: %+v", st)
	}
	// nginx has no Restart=: KILL leaves it failed.
	ng := byUnit["nginx.service"]
	if err := s.MainExited(ctx, "nginx.service", ng.PID, "KILL"); err != nil {
		t.Fatal(err)
	}
	if st := states(t, s)["nginx.service"]; st.ActiveState != "failed" || st.MainPID != 0 {
		t.Fatalf("nginx after KILL: %+v", st)
	}
	res, err := s.Journal().Query(ctx, journal.Query{Units: []string{"nginx.service"}, Priority: -1})
	if err != nil {
		t.Fatal(err)
	}
	if log := strings.Join(messages(res), "\n"); !strings.Contains(log, "status=9/KILL") || !strings.Contains(log, "Failed with result 'signal'") {
		t.Fatalf("nginx journal:\n%s", log)
	}
	if err := s.MainExited(ctx, "nosuch.service", 1, "TERM"); err == nil {
		t.Fatal("an unknown unit was accepted")
	}
}
