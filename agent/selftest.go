package agent

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/raspi-mcp/raspi-mcp/agent/store"
	"github.com/raspi-mcp/raspi-mcp/agent/tool"
	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/hw/gpio"
	"github.com/raspi-mcp/raspi-mcp/hw/sysinfo"
	"github.com/raspi-mcp/raspi-mcp/hw/units"
	"github.com/raspi-mcp/raspi-mcp/internal/identity"
	"github.com/raspi-mcp/raspi-mcp/privhelper/client"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
	"github.com/raspi-mcp/raspi-mcp/privhelper/witness"
)

// selftest.run checks the live device the agent serves, as it is now:
// `raspi-mcp selftest` checks the binary on a board it simulates, this
// checks the helper, sockets, database, audit trail, clock, disk, pins,
// buses, sensors, camera, systemd and upstreams of this install, and says
// for each failure what to do. It only reads: every check is one the
// agent or the helper already makes for a read tool.
//
// It has a namespace of its own with no switch: it is what a person runs
// when something is wrong, including when [manage] has been turned off,
// and it changes nothing and shows no more than manage_get_server_status.

// Check outcomes, from best to worst.
const (
	CheckPass = "pass"
	CheckWarn = "warn"
	CheckFail = "fail"
)

// selftestCheck is one row of the matrix.
type selftestCheck struct {
	Name    string `json:"name" jsonschema:"what was checked, e.g. helper, agent_socket, gpio_pin_17"`
	Status  string `json:"status" jsonschema:"pass, warn or fail"`
	Detail  string `json:"detail" jsonschema:"what was found"`
	FixHint string `json:"fix_hint,omitempty" jsonschema:"what to do, for a warn or fail"`
}

// SelftestOut is selftest.run.
type SelftestOut struct {
	Status  string          `json:"status" jsonschema:"pass, warn or fail: the worst check"`
	Pass    int             `json:"pass"`
	Warn    int             `json:"warn"`
	Fail    int             `json:"fail"`
	Checks  []selftestCheck `json:"checks"`
	Device  string          `json:"device" jsonschema:"the board checked"`
	Mode    string          `json:"mode" jsonschema:"device, or sim in laptop mode"`
	Version string          `json:"version"`
}

// checkTimeout bounds one check: a hung helper or D-Bus shows as a failed
// check, not a hung self-test.
const checkTimeout = 10 * time.Second

// dbLimit is the largest state database this build should keep: bbolt maps
// the whole file, and a 32-bit process has about 2-3 GiB of address space
// in all. Half of it is a warning.
func dbLimit() int64 {
	if strings.Contains("386 arm mips mipsle", runtime.GOARCH) {
		return 512 << 20
	}
	return 4 << 30
}

// selftester is selftest.run and the start-up check of a self-update: every
// source the checks read, as the read tools read them. The upstreams are
// mounted after the catalog is built, so they are read through a func.
type selftester struct {
	conf          func() *config.Config
	mode, version string
	helper        *client.Client
	store         *store.DB      // its size and the audit chain
	sys           sysinfo.Source // disk, hardware, the board's name
	root          fs.FS          // the time-sync flag file
	units         units.Units    // nil: systemd is not checked
	upstreams     func() []upstreamStatus
}

func (a *Agent) selftester() *selftester {
	return &selftester{conf: a.conf, mode: a.mode, version: a.version, helper: a.helper, store: a.store,
		sys: a.sys, root: a.root, units: a.units, upstreams: a.lanStatus}
}

func (a *Agent) registerSelftest() { a.selftester().register(a.tools) }

func (sc *selftester) register(r *tool.Registry) {
	tool.Add(r, tool.Spec[noArgs, SelftestOut]{
		ID: "selftest.run", Title: "Self-test of this device",
		Description: "Self-check of the live device: pass, warn or fail per part, with fix hints.",
		Rule:        tool.Rule{MinRole: identity.RoleRead},
		Run:         func(ctx context.Context, _ *tool.Call, _ noArgs) (SelftestOut, error) { return sc.run(ctx), nil },
		Summary: func(_ noArgs, o SelftestOut) string {
			s := fmt.Sprintf("selftest %s: %d pass, %d warn, %d fail", o.Status, o.Pass, o.Warn, o.Fail)
			for _, c := range o.Checks {
				if c.Status == CheckFail {
					s += "; " + c.Name + ": " + c.Detail
					break
				}
			}
			return s
		},
	})
}

// selftest runs every check; `raspi-mcp status --check` shows the same.
func (sc *selftester) run(ctx context.Context) SelftestOut {
	out := SelftestOut{Mode: sc.mode, Version: sc.version, Checks: []selftestCheck{}}
	record := func(c selftestCheck) { out.Checks = append(out.Checks, c) }
	pass := func(name, f string, args ...any) {
		record(selftestCheck{Name: name, Status: CheckPass, Detail: fmt.Sprintf(f, args...)})
	}
	warn := func(name, hint, f string, args ...any) {
		record(selftestCheck{Name: name, Status: CheckWarn, Detail: fmt.Sprintf(f, args...), FixHint: hint})
	}
	fail := func(name, hint, f string, args ...any) {
		record(selftestCheck{Name: name, Status: CheckFail, Detail: fmt.Sprintf(f, args...), FixHint: hint})
	}
	bounded := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, checkTimeout) }
	restartHelper := "sudo systemctl restart raspi-mcp-helper; journalctl -u raspi-mcp-helper says why it stopped"
	if sc.mode == "sim" {
		restartHelper = "restart laptop mode (Ctrl-C, then raspi-mcp serve --sim): it starts its helper"
	}

	// The root helper: everything that changes the device goes through it.
	cctx, cancel := bounded()
	st, herr := client.Call(cctx, sc.helper, proto.Status, proto.StatusReq{})
	cancel()
	helperUp := herr == nil
	switch {
	case !helperUp:
		fail("helper", restartHelper, "the root helper does not answer on %s: %v", sc.conf().Helper.Socket, herr)
	case strings.TrimPrefix(st.Helper, "raspi-mcp-helper/") != sc.version: // the helper names itself with its version
		warn("helper", "install the agent and the helper from the same release, then restart both",
			"helper %s (pid %d, %s backend) answers, but the agent is %s", st.Helper, st.PID, st.Backend, sc.version)
	default:
		pass("helper", "helper %s (pid %d, %s backend) answers", st.Helper, st.PID, st.Backend)
	}
	helperDown := func(name string) {
		warn(name, restartHelper, "not checked: the root helper is unreachable")
	}

	sc.checkSockets(record)

	// The database and the audit trail.
	if size, err := sc.store.Size(); err != nil {
		fail("database", "check the file system under "+sc.store.Path()+"; the agent's journal says more", "cannot read %s: %v", sc.store.Path(), err)
	} else {
		limit := dbLimit()
		detail := fmt.Sprintf("%s is %s (limit on %s: %s)", sc.store.Path(), bytesHuman(size), runtime.GOARCH, bytesHuman(limit))
		hint := "lower [metrics] retention or [audit] retention, then restart the agent; it compacts the file"
		switch {
		case size > limit:
			fail("database", hint, "%s", detail)
		case size > limit/2:
			warn("database", hint, "%s", detail)
		default:
			pass("database", "%s", detail)
		}
	}
	sc.checkAudit(pass, warn, fail)

	// The clock: audit times, schedules and TLS to upstreams need it.
	sc.checkClock(pass, warn, fail)

	cctx, cancel = bounded()
	h, err := sc.sys.Health(cctx)
	cancel()
	if err != nil {
		fail("disk", "the agent cannot read the system's state; its journal says why", "%v", err)
	} else if h.DiskTotalBytes > 0 {
		free := h.DiskTotalBytes - min(h.DiskUsedBytes, h.DiskTotalBytes)
		pct := float64(free) * 100 / float64(h.DiskTotalBytes)
		detail := fmt.Sprintf("%s free of %s on / (%.0f%%)", bytesHuman(int64(free)), bytesHuman(int64(h.DiskTotalBytes)), pct)
		hint := "free space on /: sudo journalctl --vacuum-size=100M, sudo apt-get clean, or remove old files"
		switch {
		case free < 200<<20 || pct < 3:
			fail("disk", hint, "%s", detail)
		case free < 1<<30 || pct < 10:
			warn("disk", hint, "%s", detail)
		default:
			pass("disk", "%s", detail)
		}
	}

	cctx, cancel = bounded()
	hw, hwErr := sc.sys.Hardware(cctx)
	cancel()
	if dev, err := deviceOf(ctx, sc.sys); err == nil {
		out.Device = dev.Model
	}

	// Every allowlisted pin, as the helper sees its line.
	if sc.conf().GPIO.Enabled && len(sc.conf().GPIO.Pins) > 0 {
		if !helperUp {
			helperDown("gpio_pins")
		} else {
			sc.checkPins(ctx, pass, fail)
		}
	}

	// The approval button ([guard.button]), as the helper holds it.
	if !sc.conf().Guard.Button.Wired() {
		pass("approval_button", "no approval button is wired ([guard.button] pin = -1): nothing to check")
	} else if !helperUp {
		helperDown("approval_button")
	} else {
		sc.checkButton(ctx, pass, warn, fail)
	}

	// Buses in the I2C allowlists and the sensors on them.
	if sc.conf().I2C.Enabled {
		if buses := sc.i2cBuses(); len(buses) > 0 {
			if !helperUp {
				helperDown("i2c_buses")
			} else {
				cctx, cancel = bounded()
				got, err := client.Call(cctx, sc.helper, proto.I2CBuses, proto.I2CBusesReq{})
				cancel()
				for _, b := range buses {
					name := "i2c_bus_" + strconv.Itoa(b)
					switch {
					case err != nil:
						fail(name, restartHelper, "the helper cannot list the I2C buses: %v", err)
					case !slices.ContainsFunc(got.Buses, func(x proto.I2CBus) bool { return x.Bus == b }):
						fail(name, fmt.Sprintf("enable I2C (sudo raspi-config nonint do_i2c 0, or dtparam=i2c_arm=on in config.txt) and reboot, or remove bus %d from [i2c]", b),
							"/dev/i2c-%d is not there", b)
					default:
						pass(name, "/dev/i2c-%d is there", b)
					}
				}
			}
		}
		for _, s := range sc.conf().I2C.Sensors {
			name := "sensor_" + s.Name
			if !helperUp {
				helperDown(name)
				continue
			}
			cctx, cancel = bounded()
			r, err := client.Call(cctx, sc.helper, proto.SensorRead, proto.SensorReadReq{Name: s.Name})
			cancel()
			if err != nil {
				fail(name, fmt.Sprintf("check the wiring of the %s at bus %d address 0x%02x (i2cdetect -y %d shows it), or fix [[i2c.sensors]]", s.Type, s.Bus, s.Address, s.Bus),
					"%s at %d:0x%02x does not answer: %v", s.Type, s.Bus, s.Address, err)
			} else {
				temp := ""
				if r.TemperatureC != nil {
					temp = fmt.Sprintf(", %.1f °C", *r.TemperatureC)
				}
				pass(name, "%s at %d:0x%02x answers%s", s.Type, s.Bus, s.Address, temp)
			}
		}
	}

	if sc.conf().Camera.Enabled {
		switch {
		case hwErr != nil:
			fail("camera", "the agent cannot read the hardware list; its journal says why", "%v", hwErr)
		case len(hw.Cameras) == 0:
			fail("camera", "connect the camera with the Pi off, check camera_auto_detect=1 in /boot/firmware/config.txt, reboot; or set [camera] enabled = false",
				"[camera] is enabled but no camera is detected")
		default:
			pass("camera", "%s", strings.Join(hw.Cameras, ", "))
		}
	}

	// systemd, read over D-Bus by the agent; logind, asked by the helper.
	if sc.units != nil {
		cctx, cancel = bounded()
		us, err := sc.units.List(cctx)
		cancel()
		if err != nil {
			fail("systemd", "check that the system D-Bus runs (systemctl status dbus) and the agent may read it", "cannot list units: %v", err)
		} else {
			pass("systemd", "%d service units listed", len(us))
		}
	}
	if !helperUp {
		helperDown("logind")
	} else {
		cctx, cancel = bounded()
		ps, err := client.Call(cctx, sc.helper, proto.PowerState, proto.PowerStateReq{})
		cancel()
		record(logindCheck(ps, err, sc.conf().System.Reboot || sc.conf().System.Shutdown))
	}

	for _, u := range sc.upstreams() {
		name := "upstream_" + u.Name
		switch u.State {
		case "up":
			pass(name, "%s is up (%d tools mounted)", u.Endpoint, u.Mounted)
		case "connecting":
			warn(name, "wait a few seconds and run the self-test again", "%s: still connecting", u.Endpoint)
		default:
			fail(name, fmt.Sprintf("check that %s runs and is reachable from this device; its token (%s) must be valid", u.Endpoint, u.Token),
				"%s is %s: %s", u.Endpoint, u.State, u.LastError)
		}
	}

	out.Status = CheckPass
	for _, c := range out.Checks {
		switch c.Status {
		case CheckPass:
			out.Pass++
		case CheckWarn:
			out.Warn++
		case CheckFail:
			out.Fail++
		}
	}
	if out.Warn > 0 {
		out.Status = CheckWarn
	}
	if out.Fail > 0 {
		out.Status = CheckFail
	}
	return out
}

// checkSockets checks both sockets' modes and owners: the agent's is for
// the agent's user and [agent] socket_group, the helper's for the agent's
// user only. Neither may be open to everyone.
func (sc *selftester) checkSockets(record func(selftestCheck)) {
	me := os.Getuid()
	for _, s := range []struct{ name, path, group string }{
		{"agent_socket", sc.conf().Agent.Socket, sc.conf().Agent.SocketGroup},
		{"helper_socket", sc.conf().Helper.Socket, ""},
	} {
		c := selftestCheck{Name: s.name, Status: CheckPass}
		fi, err := os.Stat(s.path)
		if err != nil {
			c.Status, c.Detail = CheckFail, err.Error()
			c.FixHint = "restart raspi-mcp (sudo systemctl restart raspi-mcp raspi-mcp-helper): each creates its socket"
			record(c)
			continue
		}
		mode := fi.Mode().Perm()
		uid, gid := -1, -1
		if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
			uid, gid = int(sys.Uid), int(sys.Gid)
		}
		c.Detail = fmt.Sprintf("%s mode %04o owner %d group %d", s.path, mode, uid, gid)
		switch {
		case mode&0o007 != 0:
			c.Status = CheckFail
			c.FixHint = fmt.Sprintf("everyone may connect to %s: restart the service that creates it (it sets mode 0660), and check nothing runs chmod on it", s.path)
		case uid != me:
			c.Status = CheckFail
			c.FixHint = fmt.Sprintf("%s belongs to uid %d, not the agent's uid %d: check User= in the units and [helper] agent_user, then restart both", s.path, uid, me)
		case s.group != "" && groupName(gid) != s.group:
			c.Status = CheckWarn
			c.FixHint = fmt.Sprintf("its group is not [agent] socket_group %q: restart raspi-mcp so it sets the group again", s.group)
		}
		record(c)
	}
}

// groupName is gid's name, or the number when it has none.
func groupName(gid int) string {
	if g, err := user.LookupGroupId(strconv.Itoa(gid)); err == nil {
		return g.Name
	}
	return strconv.Itoa(gid)
}

// checkAudit verifies the hash chain against the helper's witness, as
// `raspi-mcp audit verify` does.
func (sc *selftester) checkAudit(pass func(string, string, ...any), warn, fail func(string, string, string, ...any)) {
	w, info, werr := readWitness(witness.Path(sc.conf().Helper.StateDir))
	v, err := sc.store.VerifyAuditWitness(w)
	switch {
	case err != nil:
		fail("audit_chain", "raspi-mcp audit verify shows the details", "cannot verify: %v", err)
	case !v.OK:
		first := ""
		if len(v.Problems) > 0 {
			first = ": " + v.Problems[0].Kind + " at " + strconv.FormatUint(v.Problems[0].Seq, 10) + ": " + v.Problems[0].Detail
		}
		fail("audit_chain", "the trail was edited, cut or wiped: keep the file as evidence; raspi-mcp audit verify lists every finding",
			"%d problems in %d records%s", v.ProblemCount, v.Records, first)
	default:
		pass("audit_chain", "%d records, hash chain intact", v.Records)
	}
	switch {
	case werr != nil:
		fail("audit_witness", "the helper's witness file is unreadable; raspi-mcp audit verify shows the details", "%s: %v", info.Path, werr)
	case w == nil && v.Records > 0:
		warn("audit_witness", "the helper witnesses new records while it runs: check that it is up", "%s", info.Error)
	case w == nil:
		pass("audit_witness", "nothing to witness yet")
	case v.Unwitnessed > 0:
		warn("audit_witness", "the helper was down or is behind: it catches up while it runs", "witnessed up to record %d; %d newer records not yet witnessed", v.WitnessSeq, v.Unwitnessed)
	default:
		pass("audit_witness", "the helper witnessed the chain up to record %d", v.WitnessSeq)
	}
}

// checkClock reads whether systemd-timesyncd (or chrony via timedatectl's
// file) has synchronised the clock; without that file, the kernel's own
// flag (adjtimex) says whether any NTP daemon has.
func (sc *selftester) checkClock(pass func(string, string, ...any), warn, fail func(string, string, string, ...any)) {
	hint := "enable time sync (sudo timedatectl set-ntp true) and check the network reaches an NTP server; a Pi has no battery clock"
	if _, err := fs.Stat(sc.root, "run/systemd/timesync/synchronized"); err == nil {
		pass("clock", "synchronised (systemd-timesyncd)")
		return
	}
	if sc.mode == "sim" {
		warn("clock", "nothing to do in laptop mode: the simulated board has no time service", "the simulated board reports no time sync")
		return
	}
	synced, err := kernelClockSynced()
	switch {
	case err != nil:
		warn("clock", hint, "cannot tell whether the clock is synchronised: %v", err)
	case synced:
		pass("clock", "synchronised (the kernel's NTP state)")
	default:
		fail("clock", hint, "the clock is not synchronised: times in the audit trail and schedules may be wrong")
	}
}

// checkPins asks the helper for the allowlisted lines and fails each that
// is missing or held by another process.
func (sc *selftester) checkPins(ctx context.Context, pass func(string, string, ...any), fail func(string, string, string, ...any)) {
	var pins []int
	for _, p := range sc.conf().GPIO.Pins {
		pins = append(pins, p.Pin)
	}
	cctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	st, err := client.Call(cctx, sc.helper, proto.GPIOState, proto.GPIOStateReq{Pins: pins})
	if err != nil {
		fail("gpio_pins", "check that the GPIO chip exists (ls /dev/gpiochip*) and the helper's journal", "the helper cannot read the pins: %v", err)
		return
	}
	for _, cp := range sc.conf().GPIO.Pins {
		name := "gpio_pin_" + strconv.Itoa(cp.Pin)
		i := slices.IndexFunc(st.Pins, func(p proto.GPIOPin) bool { return p.Pin == cp.Pin })
		switch {
		case i < 0:
			fail(name, fmt.Sprintf("pin %d is not on this board's GPIO chip: fix [gpio] pins", cp.Pin), "pin %d (%s) not found", cp.Pin, cp.Name)
		case st.Pins[i].Consumer != "" && st.Pins[i].Consumer != gpio.DefaultConsumer:
			p := st.Pins[i]
			fail(name, fmt.Sprintf("another process holds %s line %d as %q: stop it (gpioinfo shows the line; fuser or lsof /dev/%s finds the process), or remove pin %d from [gpio] pins",
				p.Chip, p.Line, p.Consumer, p.Chip, cp.Pin),
				"pin %d (%s) is held by %q", cp.Pin, cp.Name, p.Consumer)
		case st.Pins[i].Mode == gpio.ModeAlt:
			p := st.Pins[i]
			fail(name, fmt.Sprintf("the kernel uses pin %d for another function (an overlay in config.txt: I2C, SPI, UART, PWM): remove that overlay or the pin from [gpio] pins", cp.Pin),
				"pin %d (%s) is in alternate-function mode on %s line %d", cp.Pin, cp.Name, p.Chip, p.Line)
		default:
			pass(name, "pin %d (%s) %s on %s line %d", cp.Pin, cp.Name, st.Pins[i].Mode, st.Pins[i].Chip, st.Pins[i].Line)
		}
	}
}

// checkButton reports the approval button's health (button.status): a
// missing line fails (no device approval can be given), a stuck or
// bouncing one warns (approvals may be refused or misread).
func (sc *selftester) checkButton(ctx context.Context, pass func(string, string, ...any), warn, fail func(string, string, string, ...any)) {
	const name = "approval_button"
	cctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	st, err := client.Call(cctx, sc.helper, proto.ButtonStatus, proto.ButtonStatusReq{})
	if err != nil {
		if proto.CodeOf(err) == proto.CodeNotFound {
			warn(name, "install the agent and the helper from the same release, then restart both", "the helper does not serve button.status: %v", err)
			return
		}
		fail(name, "the helper's journal says why (journalctl -u raspi-mcp-helper)", "the helper cannot report the approval button: %v", err)
		return
	}
	b := sc.conf().Guard.Button
	switch st.State {
	case proto.ButtonOK:
		pass(name, "button on GPIO%d (LED %s): %s", st.Pin, ledName(st.LED), st.Detail)
	case proto.ButtonStuck:
		warn(name, fmt.Sprintf("check the button's wiring on GPIO%d, and that [guard.button] active_low matches it (true for a button to ground with pull \"up\")", b.Pin), "%s", st.Detail)
	case proto.ButtonBouncing:
		warn(name, fmt.Sprintf("raise [guard.button] debounce (now %s) or replace the button on GPIO%d", b.Debounce.D(), b.Pin), "%s", st.Detail)
	case proto.ButtonUnwired:
		warn(name, "the helper read another [guard.button] than the agent: sudo systemctl reload raspi-mcp-helper", "the agent's config wires a button on GPIO%d, the helper's none", b.Pin)
	default: // missing
		fail(name, fmt.Sprintf("check [guard.button] pin = %d against the board (gpioinfo lists the lines) and that no other program holds it", b.Pin), "%s", st.Detail)
	}
}

func ledName(pin int) string {
	if pin < 0 {
		return "none"
	}
	return "GPIO" + strconv.Itoa(pin)
}

// i2cBuses are the buses the I2C allowlists and the sensors name, sorted.
func (sc *selftester) i2cBuses() []int {
	var buses []int
	for _, e := range slices.Concat(sc.conf().I2C.Read, sc.conf().I2C.Write) {
		bus, _, _ := strings.Cut(e, ":")
		if b, err := strconv.Atoi(strings.TrimSpace(bus)); err == nil {
			buses = append(buses, b)
		}
	}
	for _, s := range sc.conf().I2C.Sensors {
		buses = append(buses, s.Bus)
	}
	slices.Sort(buses)
	return slices.Compact(buses)
}

func bytesHuman(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// logindCheck is the logind row from the helper's power.state answer. A
// helper that found no logind when it started serves no power methods and
// answers not_found: that is said as what it means (no reboot or shutdown
// here), a failure only when the configuration turns either on.
func logindCheck(ps proto.PowerStateResp, err error, powerOn bool) selftestCheck {
	c := selftestCheck{Name: "logind", Status: CheckPass, Detail: "answers; no power action scheduled"}
	switch {
	case proto.CodeOf(err) == proto.CodeNotFound:
		c.Status, c.Detail = CheckWarn, "logind not running: reboot/shutdown unavailable (the helper found no systemd-logind when it started)"
		c.FixHint = "start systemd-logind (systemctl status systemd-logind), then restart the helper (systemctl restart raspi-mcp-helper); on an image without systemd, set [system] reboot = false and shutdown = false"
		if powerOn {
			c.Status = CheckFail
		}
	case err != nil:
		c.Status, c.Detail = CheckFail, fmt.Sprintf("the helper cannot ask logind: %v", err)
		c.FixHint = "check systemd-logind (systemctl status systemd-logind); reboot and shutdown need it"
	case ps.Scheduled:
		c.Status, c.Detail = CheckWarn, fmt.Sprintf("a %s is scheduled for %s", ps.Action, ps.At.UTC().Format(time.RFC3339))
		c.FixHint = "manage_list_jobs shows it; system_cancel_scheduled_power_action cancels it"
	}
	return c
}
