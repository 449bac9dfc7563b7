package proto

import (
	"strings"
	"time"
)

// The package manager part of the table. The agent works out a plan with
// apt-get -s itself (that needs no privilege); the helper refreshes the
// package lists and installs exactly a plan, running apt as a transient
// systemd unit outside its own sandbox, one run at a time.
var (
	// Refresh and apply wait only for the transient unit's start job (the
	// run itself is followed with apt.status): Systemd.
	AptRefresh = Method[AptRefreshReq, AptRun]{"apt.refresh", Systemd}
	AptApply   = Method[AptApplyReq, AptRun]{"apt.apply", Systemd}
	// Cancel waits for the run's stop job, bounded by TimeoutStopSec: Job.
	AptCancel = Method[AptCancelReq, AptRun]{"apt.cancel", Job}
	AptStatus = Method[AptStatusReq, AptStatusResp]{"apt.status", Quick}
)

func aptMethods() []Info {
	return []Info{AptRefresh.Info(), AptApply.Info(), AptCancel.Info(), AptStatus.Info()}
}

// MaxAptPackages bounds a plan: a full upgrade of a desktop image is a few
// hundred packages.
const MaxAptPackages = 2000

// AptRefreshReq runs apt-get update.
type AptRefreshReq struct{}

// AptPackage is one package of a plan: To is the version to install
// (empty for a removal), From the version the plan was made against.
type AptPackage struct {
	Name string `json:"name"`
	From string `json:"from,omitempty"`
	To   string `json:"to,omitempty"`
}

// AptApplyReq is a plan to install exactly. PlanHash is the agent's hash
// of it; the helper computes its own and refuses a mismatch, so the plan
// the agent audited is the plan that runs.
type AptApplyReq struct {
	PlanHash string       `json:"plan_hash"`
	Upgrades []AptPackage `json:"upgrades"`
	Installs []AptPackage `json:"installs"`
	Removals []AptPackage `json:"removals"`
	Held     []string     `json:"held"`
}

// AptCancelReq stops a run, if it has not reached dpkg.
type AptCancelReq struct {
	ID string `json:"id"`
}

// AptStatusReq asks for one run, or with ID "" for every run the helper
// remembers.
type AptStatusReq struct {
	ID string `json:"id"`
}

// AptRun is one run of apt as the helper reports it.
type AptRun struct {
	ID                string    `json:"id"`
	Kind              string    `json:"kind"`  // refresh or apply
	State             string    `json:"state"` // running, succeeded, failed, cancelled
	Phase             string    `json:"phase"` // update, download or install
	Percent           float64   `json:"percent"`
	Message           string    `json:"message"`
	StartedAt         time.Time `json:"started_at"`
	FinishedAt        time.Time `json:"finished_at,omitzero"`
	Error             string    `json:"error,omitempty"`
	PlanHash          string    `json:"plan_hash,omitempty"`
	Targets           []string  `json:"targets,omitempty"`
	Cancellable       bool      `json:"cancellable"`
	ConffilesKept     []string  `json:"conffiles_kept,omitempty"`
	ConffilesReplaced []string  `json:"conffiles_replaced,omitempty"`
	Unit              string    `json:"unit"`
}

// AptStatusResp lists runs, oldest first.
type AptStatusResp struct {
	Runs []AptRun `json:"runs"`
}

// Validate implements Validator.
func (AptRefreshReq) Validate() error { return nil }

// Validate implements Validator: names and versions in Debian's
// characters only, so nothing can read as an option or a second package.
func (r AptApplyReq) Validate() error {
	if !strings.HasPrefix(r.PlanHash, "sha256:") || len(r.PlanHash) != len("sha256:")+64 {
		return Errorf(CodeInvalidArgument, "plan_hash %q is not sha256:<64 hex digits>", clip(r.PlanHash))
	}
	n := len(r.Upgrades) + len(r.Installs) + len(r.Removals)
	if n == 0 {
		return Errorf(CodeInvalidArgument, "the plan changes nothing")
	}
	if n+len(r.Held) > MaxAptPackages {
		return Errorf(CodeInvalidArgument, "the plan has %d packages, at most %d", n+len(r.Held), MaxAptPackages)
	}
	for _, list := range [][]AptPackage{r.Upgrades, r.Installs, r.Removals} {
		for _, p := range list {
			if err := validPackageName(p.Name); err != nil {
				return err
			}
			for _, v := range []string{p.From, p.To} {
				if err := validPackageVersion(v); v != "" && err != nil {
					return err
				}
			}
		}
	}
	for _, p := range append(append([]AptPackage{}, r.Upgrades...), r.Installs...) {
		if p.To == "" {
			return Errorf(CodeInvalidArgument, "package %s has no version to install", p.Name)
		}
	}
	for _, h := range r.Held {
		if err := validPackageName(h); err != nil {
			return err
		}
	}
	return nil
}

// Validate implements Validator.
func (r AptCancelReq) Validate() error { return validRunID(r.ID) }

// Validate implements Validator.
func (r AptStatusReq) Validate() error {
	if r.ID == "" {
		return nil
	}
	return validRunID(r.ID)
}

func validRunID(id string) error {
	if len(id) == 0 || len(id) > 64 || strings.Trim(id, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
		return Errorf(CodeInvalidArgument, "run id %q is not a run id such as os-update-1a2b3c4d5e6f", clip(id))
	}
	return nil
}

func validPackageName(n string) error {
	base, arch, _ := strings.Cut(n, ":")
	if len(n) > 128 || len(base) < 2 || strings.Trim(base[:1], "abcdefghijklmnopqrstuvwxyz0123456789") != "" ||
		strings.Trim(base, "abcdefghijklmnopqrstuvwxyz0123456789+-.") != "" ||
		strings.Trim(arch, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" || strings.HasSuffix(n, ":") {
		return Errorf(CodeInvalidArgument, "package %q is not a Debian package name", clip(n))
	}
	return nil
}

func validPackageVersion(v string) error {
	const alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	if v == "" || len(v) > 128 || strings.Trim(v[:1], alnum) != "" || strings.Trim(v, alnum+".+~:-") != "" {
		return Errorf(CodeInvalidArgument, "version %q is not a Debian version", clip(v))
	}
	return nil
}
