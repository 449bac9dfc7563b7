package power

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/godbus/dbus/v5"
)

// logind's D-Bus names. go-systemd's login1 package does not wrap
// ScheduleShutdown, so Logind talks to the manager object directly.
const (
	login1Dest    = "org.freedesktop.login1"
	login1Path    = dbus.ObjectPath("/org/freedesktop/login1")
	login1Manager = "org.freedesktop.login1.Manager"

	methodSchedule = login1Manager + ".ScheduleShutdown"
	methodCancel   = login1Manager + ".CancelScheduledShutdown"
	methodGetProp  = "org.freedesktop.DBus.Properties.Get"
	propScheduled  = "ScheduledShutdown"
)

// callFunc performs one D-Bus method call on the login1 manager object and
// stores the reply body into out. It is the only seam between Logind and the
// bus, so tests can check the exact arguments without a system bus.
type callFunc func(ctx context.Context, method string, args []any, out ...any) error

// Logind schedules power actions through systemd-logind, which gives the
// usual wall messages, nologin handling and `shutdown -c` compatibility for
// free. It needs root (or a polkit grant); only the helper uses it.
type Logind struct {
	conn *dbus.Conn // nil in tests
	call callFunc
}

var _ Power = (*Logind)(nil)

// NewLogind opens a private connection to the system bus. Close releases it.
func NewLogind() (*Logind, error) {
	conn, err := dbus.ConnectSystemBus()
	if err != nil {
		return nil, fmt.Errorf("power: connect to the system bus: %w", err)
	}
	obj := conn.Object(login1Dest, login1Path)
	return &Logind{
		conn: conn,
		call: func(ctx context.Context, method string, args []any, out ...any) error {
			return obj.CallWithContext(ctx, method, 0, args...).Store(out...)
		},
	}, nil
}

// Close closes the bus connection.
func (l *Logind) Close() error {
	if l.conn == nil {
		return nil
	}
	return l.conn.Close()
}

// Schedule calls Manager.ScheduleShutdown(type, usec since the epoch). A time
// in the past is sent as is; logind then acts at once, which is what a delay
// of 0 means.
func (l *Logind) Schedule(ctx context.Context, a Action, at time.Time) error {
	if err := checkAction(a); err != nil {
		return err
	}
	usec := at.UnixMicro()
	if usec <= 0 {
		return fmt.Errorf("power: logind: schedule time %s is not after the epoch", at.Format(time.RFC3339))
	}
	if err := l.call(ctx, methodSchedule, []any{string(a), uint64(usec)}); err != nil {
		return fmt.Errorf("power: logind: schedule %s at %s: %w", a, at.Format(time.RFC3339), err)
	}
	return nil
}

// Cancel reads the pending schedule, then calls
// Manager.CancelScheduledShutdown. Another client could change the schedule
// between the two calls; the returned Schedule is then the one read.
func (l *Logind) Cancel(ctx context.Context) (Schedule, bool, error) {
	prev, _, err := l.Scheduled(ctx)
	if err != nil {
		return Schedule{}, false, err
	}
	var cancelled bool
	if err := l.call(ctx, methodCancel, nil, &cancelled); err != nil {
		return Schedule{}, false, fmt.Errorf("power: logind: cancel scheduled shutdown: %w", err)
	}
	if !cancelled {
		return Schedule{}, false, nil
	}
	return prev, true, nil
}

// Scheduled reads the ScheduledShutdown property, a (type string, usec
// uint64) struct that is ("", 0) when nothing is pending. Types other than
// reboot and poweroff (halt, kexec, dry-*), set by an administrator with
// shutdown(8), are reported as is.
func (l *Logind) Scheduled(ctx context.Context) (Schedule, bool, error) {
	var v dbus.Variant
	if err := l.call(ctx, methodGetProp, []any{login1Manager, propScheduled}, &v); err != nil {
		return Schedule{}, false, fmt.Errorf("power: logind: read %s: %w", propScheduled, err)
	}
	fields, ok := v.Value().([]any)
	if !ok || len(fields) != 2 {
		return Schedule{}, false, fmt.Errorf("power: logind: %s has unexpected value %s", propScheduled, v)
	}
	typ, ok1 := fields[0].(string)
	usec, ok2 := fields[1].(uint64)
	if !ok1 || !ok2 {
		return Schedule{}, false, fmt.Errorf("power: logind: %s has unexpected value %s", propScheduled, v)
	}
	// logind reports ("", 0) when idle; USEC_INFINITY (all ones) is treated
	// the same, and anything else past int64 is nonsense rather than a time.
	if typ == "" || usec == 0 || usec == math.MaxUint64 {
		return Schedule{}, false, nil
	}
	if usec > math.MaxInt64 {
		return Schedule{}, false, fmt.Errorf("power: logind: %s time %d is out of range", propScheduled, usec)
	}
	return Schedule{Action: Action(typ), At: time.UnixMicro(int64(usec))}, true, nil
}
