package proto

import (
	"fmt"
	"strings"
)

// The operations part of the table: systemd units and signals. The agent
// reads units and processes itself; only changes come here, and the helper
// re-checks each against the owner's allowlists.
var (
	// service.control waits for the unit's job, which systemd bounds by
	// its TimeoutStartSec/TimeoutStopSec: Job.
	ServiceControl = Method[ServiceControlReq, ServiceControlResp]{"service.control", Job}
	// service.enable changes the unit file's symlinks and then waits for a
	// daemon-reload, which re-reads every unit: Systemd.
	ServiceEnable = Method[ServiceEnableReq, ServiceEnableResp]{"service.enable", Systemd}
	ProcessSignal = Method[ProcessSignalReq, ProcessSignalResp]{"process.signal", Quick}
)

func opsMethods() []Info {
	return []Info{ServiceControl.Info(), ServiceEnable.Info(), ProcessSignal.Info()}
}

// Service actions.
const (
	ServiceStart   = "start"
	ServiceStop    = "stop"
	ServiceRestart = "restart"
	ServiceReload  = "reload"
)

// ServiceControlReq starts, stops, restarts or reloads one unit and waits
// for systemd's job result. Force skips the helper's own check for active
// dependents; the agent sets it only for an admin who confirmed.
type ServiceControlReq struct {
	Unit   string `json:"unit"`
	Action string `json:"action"`
	Force  bool   `json:"force"`
}

// UnitState is a unit as systemd reports it around a change.
type UnitState struct {
	ActiveState   string `json:"active_state"`
	SubState      string `json:"sub_state"`
	UnitFileState string `json:"unit_file_state"`
	MainPID       int    `json:"main_pid"`
}

// ServiceControlResp reports systemd's job result and the unit around it.
type ServiceControlResp struct {
	Unit   string    `json:"unit"`
	Action string    `json:"action"`
	Job    string    `json:"job"` // done, canceled, timeout, failed, dependency, skipped
	Before UnitState `json:"before"`
	After  UnitState `json:"after"`
}

// ServiceEnableReq enables or disables one unit file.
type ServiceEnableReq struct {
	Unit    string `json:"unit"`
	Enabled bool   `json:"enabled"`
}

// UnitFileChange is one symlink systemd made or removed.
type UnitFileChange struct {
	Type        string `json:"type"`
	File        string `json:"file"`
	Destination string `json:"destination"`
}

// ServiceEnableResp reports the unit file state before and after.
type ServiceEnableResp struct {
	Unit    string           `json:"unit"`
	Before  string           `json:"before"`
	After   string           `json:"after"`
	Changes []UnitFileChange `json:"changes"`
}

// ProcessSignalReq signals one process. StartTicks is the process's start
// time as the agent saw it (/proc/PID/stat field 22): the helper refuses if
// the PID now belongs to another process.
type ProcessSignalReq struct {
	PID        int    `json:"pid"`
	StartTicks uint64 `json:"start_ticks"`
	Signal     string `json:"signal"` // name without SIG: TERM, HUP, ...
}

// ProcessSignalResp names what was signalled.
type ProcessSignalResp struct {
	PID    int    `json:"pid"`
	Name   string `json:"name"`
	UID    int    `json:"uid"`
	Signal string `json:"signal"`
}

// MaxUnitName is systemd's own limit on unit names.
const MaxUnitName = 256

// ValidUnitName checks a full unit name ("nginx.service"): systemd's
// characters only and never a leading "-", so no name can read as an option
// of anything it is passed to.
func ValidUnitName(u string) error {
	if u == "" || len(u) > MaxUnitName || u[0] == '-' || !strings.Contains(u, ".") {
		return Errorf(CodeInvalidArgument, "unit %q is not a unit name such as nginx.service", clip(u))
	}
	for _, r := range u {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(":_.@-\\", r)) {
			return Errorf(CodeInvalidArgument, "unit %q has a character systemd does not allow in unit names: %q", clip(u), r)
		}
	}
	return nil
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// Validate implements Validator.
func (r ServiceControlReq) Validate() error {
	if err := ValidUnitName(r.Unit); err != nil {
		return err
	}
	switch r.Action {
	case ServiceStart, ServiceStop, ServiceRestart, ServiceReload:
		return nil
	}
	return Errorf(CodeInvalidArgument, "action %q is not start, stop, restart or reload", clip(r.Action))
}

// Validate implements Validator.
func (r ServiceEnableReq) Validate() error { return ValidUnitName(r.Unit) }

// Validate implements Validator.
func (r ProcessSignalReq) Validate() error {
	if r.PID < 2 || r.PID > 1<<22 {
		return Errorf(CodeInvalidArgument, "pid %d is out of range 2..%d", r.PID, 1<<22)
	}
	if r.Signal == "" || len(r.Signal) > 8 || strings.ToUpper(r.Signal) != r.Signal || strings.HasPrefix(r.Signal, "SIG") {
		return Errorf(CodeInvalidArgument, "signal %q: want a name without SIG, such as TERM", clip(r.Signal))
	}
	if r.StartTicks == 0 {
		return Errorf(CodeInvalidArgument, "start_ticks is required: it proves which process pid %d is", r.PID)
	}
	return nil
}

// String is for logs.
func (r ProcessSignalReq) String() string {
	return fmt.Sprintf("SIG%s to pid %d", r.Signal, r.PID)
}
