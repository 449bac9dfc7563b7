package units

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestTransientSpecRefusals(t *testing.T) {
	bad := []TransientSpec{
		{Name: "", Argv: []string{"/bin/true"}},
		{Name: "x.timer", Argv: []string{"/bin/true"}},
		{Name: "x", Argv: nil},
		{Name: "x", Argv: []string{"true"}},
		{Name: "x", Argv: []string{"/bin/true"}, Env: []string{"NOEQUALS"}},
		{Name: "x", Argv: []string{"/bin/true"}, Env: []string{"A=b\nC=d"}},
		{Name: "-x", Argv: []string{"/bin/true"}},
	}
	s := &SimTransient{}
	for _, spec := range bad {
		if err := s.Start(t.Context(), spec); err == nil || !strings.HasPrefix(err.Error(), "units: ") {
			t.Errorf("Start(%+v) = %v, want a units: error", spec, err)
		}
	}
	if len(s.runs) != 0 {
		t.Errorf("refused specs left runs: %v", s.runs)
	}
}

func TestSimTransientRunAndExit(t *testing.T) {
	var gotEnv []string
	s := &SimTransient{Programs: map[string]SimProgram{
		"/usr/bin/apt-get": func(ctx context.Context, argv, env []string) int {
			gotEnv = env
			if argv[1] == "fail" {
				return 100
			}
			return 0
		},
	}}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for _, c := range []struct {
		arg  string
		code int
	}{{"ok", 0}, {"fail", 100}} {
		err := s.Start(ctx, TransientSpec{Name: "apt-" + c.arg, Argv: []string{"/usr/bin/apt-get", c.arg}, Env: []string{"DEBIAN_FRONTEND=noninteractive"}})
		if err != nil {
			t.Fatal(err)
		}
		st, err := s.Wait(ctx, "apt-"+c.arg)
		if err != nil {
			t.Fatal(err)
		}
		if !st.Exited || st.Code != c.code || st.OK() != (c.code == 0) || st.Name != "apt-"+c.arg+".service" {
			t.Errorf("%s: status %+v, want exit %d", c.arg, st, c.code)
		}
		if _, err := s.Status(ctx, "apt-"+c.arg); !errors.Is(err, ErrNotFound) {
			t.Errorf("%s: after Wait, Status = %v, want ErrNotFound", c.arg, err)
		}
	}
	if len(gotEnv) != 1 || gotEnv[0] != "DEBIAN_FRONTEND=noninteractive" {
		t.Errorf("env = %q", gotEnv)
	}
	if err := s.Start(ctx, TransientSpec{Name: "nosuch", Argv: []string{"/nonexistent"}}); err != nil {
		t.Fatal(err)
	}
	if st, err := s.Wait(ctx, "nosuch"); err != nil || st.OK() || st.Code != 203 {
		t.Errorf("unknown program: %+v, %v; want exit 203", st, err)
	}
}

func TestSimTransientStop(t *testing.T) {
	started := make(chan struct{})
	s := &SimTransient{Programs: map[string]SimProgram{
		"/bin/sleep": func(ctx context.Context, argv, env []string) int {
			close(started)
			<-ctx.Done()
			return 0
		},
	}}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := s.Start(ctx, TransientSpec{Name: "long", Argv: []string{"/bin/sleep", "inf"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx, TransientSpec{Name: "long", Argv: []string{"/bin/sleep", "inf"}}); !errors.Is(err, ErrTransientExists) {
		t.Errorf("second Start of a running name = %v, want ErrTransientExists", err)
	}
	<-started
	st, err := s.Status(ctx, "long")
	if err != nil || !st.Running || st.PID == 0 {
		t.Fatalf("running status %+v, %v", st, err)
	}
	if err := s.Stop(ctx, "long"); err != nil {
		t.Fatal(err)
	}
	st, err = s.Wait(ctx, "long")
	if err != nil || st.OK() || st.Signal != 15 {
		t.Errorf("stopped run: %+v, %v; want killed by 15", st, err)
	}
	if err := s.Stop(ctx, "long"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Stop after Wait = %v, want ErrNotFound", err)
	}
}

func TestRunStatusFromProps(t *testing.T) {
	cases := []struct {
		active, sub string
		props       map[string]any
		want        RunStatus
	}{
		{"active", "running", map[string]any{"MainPID": uint32(42)}, RunStatus{Name: "u", Running: true, PID: 42}},
		{"active", "exited", map[string]any{"ExecMainCode": int32(1), "ExecMainStatus": int32(0), "Result": "success"}, RunStatus{Name: "u", Exited: true, Result: "success"}},
		{"failed", "failed", map[string]any{"ExecMainCode": int32(1), "ExecMainStatus": int32(100), "Result": "exit-code"}, RunStatus{Name: "u", Exited: true, Code: 100, Result: "exit-code"}},
		{"failed", "failed", map[string]any{"ExecMainCode": int32(2), "ExecMainStatus": int32(9), "Result": "signal"}, RunStatus{Name: "u", Exited: true, Signal: 9, Result: "signal"}},
		{"inactive", "dead", map[string]any{"ExecMainCode": int32(2), "ExecMainStatus": int32(15)}, RunStatus{Name: "u", Exited: true, Signal: 15}},
		{"failed", "failed", map[string]any{"Result": "exit-code"}, RunStatus{Name: "u", Exited: true, Code: 1, Result: "exit-code"}},
	}
	for _, c := range cases {
		if got := runStatus("u", c.active, c.sub, c.props); got != c.want {
			t.Errorf("runStatus(%s/%s, %v) = %+v, want %+v", c.active, c.sub, c.props, got, c.want)
		}
	}
}
