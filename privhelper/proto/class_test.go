package proto

import (
	"testing"
	"time"
)

// The methods that wait on systemd, logind or apt are not quick: a quick
// bound on any of them is the defect of issue 28 (service.enable cut at
// 8 s by a daemon-reload on a loaded host).
func TestSlowMethodsAreNotQuick(t *testing.T) {
	want := map[string]Class{
		ServiceEnable.Name: Systemd, ServiceControl.Name: Job,
		PowerSchedule.Name: Systemd, PowerCancel.Name: Systemd, PowerState.Name: Systemd,
		AptRefresh.Name: Systemd, AptApply.Name: Systemd, AptCancel.Name: Job,
		UpdatePlan.Name: Systemd, UpdateStart.Name: Systemd,
		GPIOWrite.Name: Quick, I2CRead.Name: Quick, ButtonWait.Name: Approval, ButtonStatus.Name: Quick, ButtonPress.Name: Quick, Status.Name: Quick, Hello.Name: Quick,
	}
	for name, c := range want {
		got, ok := ClassOf(name)
		if !ok || got != c {
			t.Errorf("ClassOf(%s) = %s, %v; want %s", name, got, ok, c)
		}
	}
	if _, ok := ClassOf("no.such"); ok {
		t.Error("ClassOf knows a method that is not in the table")
	}
	if len(Methods()) != len(Names()) {
		t.Fatal("Methods and Names disagree")
	}
	for _, m := range Methods() {
		if m.Class.String() == "" || m.Class > Approval {
			t.Errorf("%s has class %d", m.Name, m.Class)
		}
	}
}

func TestBounds(t *testing.T) {
	var zero Bounds
	if zero.Of(Quick) != DefaultQuickTimeout || zero.Of(Systemd) != DefaultSystemdTimeout || zero.Of(Job) != DefaultJobTimeout {
		t.Fatalf("defaults: %v %v %v", zero.Of(Quick), zero.Of(Systemd), zero.Of(Job))
	}
	b := Bounds{Quick: time.Millisecond, Systemd: 2 * time.Minute, Job: 5 * time.Minute}
	if b.Of(Quick) != time.Millisecond || b.Of(Systemd) != 2*time.Minute || b.Of(Job) != 5*time.Minute {
		t.Fatalf("set: %+v", b)
	}
	// The slow classes' defaults are above the quick one and systemd's own
	// 90 s default bound on what it waits for.
	if DefaultSystemdTimeout < 90*time.Second || DefaultJobTimeout <= DefaultSystemdTimeout || DefaultQuickTimeout >= DefaultSystemdTimeout {
		t.Fatal("default bounds out of order")
	}
}

// An approval's bound follows its own wait, capped, and is never a fixed
// constant shorter than the wait.
func TestApprovalBound(t *testing.T) {
	for _, tc := range []struct{ wait, want time.Duration }{
		{time.Second, time.Second + ApprovalMargin},
		{2 * time.Minute, 2*time.Minute + ApprovalMargin},
		{MaxButtonWait, MaxButtonWait + ApprovalMargin},
		{10 * time.Hour, MaxButtonWait + ApprovalMargin},
		{-time.Second, ApprovalMargin},
	} {
		if got := ApprovalBound(tc.wait); got != tc.want {
			t.Errorf("ApprovalBound(%s) = %s, want %s", tc.wait, got, tc.want)
		}
	}
	var zero Bounds
	if zero.Of(Approval) != ApprovalBound(MaxButtonWait) {
		t.Errorf("Bounds.Of(Approval) = %s, want the cap", zero.Of(Approval))
	}
	var w Waiter = ButtonWaitReq{Call: "a1", TimeoutMS: 90000}
	if w.Wait() != 90*time.Second {
		t.Errorf("Wait = %s", w.Wait())
	}
}

func TestButtonWaitValidate(t *testing.T) {
	for _, tc := range []struct {
		r     ButtonWaitReq
		field string
	}{
		{ButtonWaitReq{Call: "a1", TimeoutMS: 1000}, ""},
		{ButtonWaitReq{Call: "a1", TimeoutMS: 1800000}, ""},
		{ButtonWaitReq{Call: "", TimeoutMS: 5000}, "call"},
		{ButtonWaitReq{Call: "a\nb", TimeoutMS: 5000}, "call"},
		{ButtonWaitReq{Call: string(make([]byte, 65)), TimeoutMS: 5000}, "call"},
		{ButtonWaitReq{Call: "a1", TimeoutMS: 999}, "timeout_ms"},
		{ButtonWaitReq{Call: "a1", TimeoutMS: 1800001}, "timeout_ms"},
	} {
		err := tc.r.Validate()
		if tc.field == "" {
			if err != nil {
				t.Errorf("%+v: %v", tc.r, err)
			}
			continue
		}
		e, ok := err.(*Error)
		if !ok || e.Code != CodeInvalidArgument || e.Details["field"] != tc.field {
			t.Errorf("%+v: %v, want invalid_argument on %s", tc.r, err, tc.field)
		}
	}
}
