package power

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"
)

// Event is one line of Sim's history, in memory and in its log file.
type Event struct {
	Time   time.Time `json:"time"`   // when the event happened
	Event  string    `json:"event"`  // "scheduled", "cancelled" or "performed"
	Action Action    `json:"action"` // the action concerned
	At     time.Time `json:"at"`     // when it was (or is) due
}

// Sim is a Power with no real effect, ever. It keeps the pending schedule in
// memory and, when the time arrives, records the action as performed, so a
// demo on a laptop can show "reboot at 12:05" and then "rebooted". Every
// event is also appended as one JSON line to the log file, if one was given,
// so an operator can `tail -f` it.
type Sim struct {
	logPath string

	mu      sync.Mutex
	pending *simPending // nil when nothing is scheduled
	events  []Event
	logErr  error // first log-file write error; see LogErr
}

// simPending is the schedule in flight and the timer that will perform it.
type simPending struct {
	s     Schedule
	timer *time.Timer
}

var _ Power = (*Sim)(nil)

// NewSim returns a Sim appending to logPath ("" for no file).
func NewSim(logPath string) *Sim { return &Sim{logPath: logPath} }

// Schedule records the action and arms a timer for it, replacing (and
// disarming) any pending one. If the log file cannot be written, nothing is
// scheduled and the error is returned.
func (s *Sim) Schedule(ctx context.Context, a Action, at time.Time) error {
	if err := checkAction(a); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("power: sim: schedule %s: %w", a, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// The log line goes first: if a demo cannot show the schedule, it is
	// better not to make one.
	e := Event{Time: time.Now(), Event: "scheduled", Action: a, At: at}
	if s.logPath != "" {
		if err := appendLine(s.logPath, e); err != nil {
			return err
		}
	}
	s.events = append(s.events, e)
	if s.pending != nil {
		s.pending.timer.Stop()
	}
	p := &simPending{s: Schedule{Action: a, At: at}}
	p.timer = time.AfterFunc(time.Until(at), func() { s.perform(p) })
	s.pending = p
	return nil
}

// perform runs on the timer's goroutine. The pointer comparison makes a timer
// that fired while being replaced or cancelled a no-op.
func (s *Sim) perform(p *simPending) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending != p {
		return
	}
	s.pending = nil
	s.record(Event{Time: time.Now(), Event: "performed", Action: p.s.Action, At: p.s.At})
}

// Cancel disarms the pending action, if any.
func (s *Sim) Cancel(ctx context.Context) (Schedule, bool, error) {
	if err := ctx.Err(); err != nil {
		return Schedule{}, false, fmt.Errorf("power: sim: cancel: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pending
	if p == nil {
		return Schedule{}, false, nil
	}
	p.timer.Stop()
	s.pending = nil
	// The cancellation has happened whatever the log file says.
	s.record(Event{Time: time.Now(), Event: "cancelled", Action: p.s.Action, At: p.s.At})
	return p.s, true, nil
}

// Scheduled returns the pending action, if any.
func (s *Sim) Scheduled(ctx context.Context) (Schedule, bool, error) {
	if err := ctx.Err(); err != nil {
		return Schedule{}, false, fmt.Errorf("power: sim: scheduled: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending == nil {
		return Schedule{}, false, nil
	}
	return s.pending.s, true, nil
}

// Events returns a copy of the history, oldest first.
func (s *Sim) Events() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.events)
}

// Performed returns the actions whose time has come, oldest first.
func (s *Sim) Performed() []Schedule {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Schedule
	for _, e := range s.events {
		if e.Event == "performed" {
			out = append(out, Schedule{Action: e.Action, At: e.At})
		}
	}
	return out
}

// LogErr returns the first error writing the log file after a schedule was
// made (Schedule itself returns its own).
func (s *Sim) LogErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logErr
}

// Close disarms any pending timer without recording a cancellation, so tests
// and a stopping helper leave nothing behind. The Sim stays usable.
func (s *Sim) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending != nil {
		s.pending.timer.Stop()
		s.pending = nil
	}
	return nil
}

// record appends e to the history and, if there is one, the log file.
// s.mu must be held, which also keeps lines from interleaving. The file is
// opened per event so log rotation or a deleted file needs no handling.
// A file error is remembered for LogErr (there is no caller to return it to
// on the timer's goroutine); the in-memory history is appended to regardless,
// because the event did happen.
func (s *Sim) record(e Event) {
	s.events = append(s.events, e)
	if s.logPath == "" {
		return
	}
	if err := appendLine(s.logPath, e); err != nil && s.logErr == nil {
		s.logErr = err
	}
}

func appendLine(path string, e Event) error {
	line, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("power: sim: encode event: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("power: sim: open log %s: %w", path, err)
	}
	_, werr := f.Write(append(line, '\n'))
	cerr := f.Close()
	if werr != nil {
		return fmt.Errorf("power: sim: write log %s: %w", path, werr)
	}
	if cerr != nil {
		return fmt.Errorf("power: sim: close log %s: %w", path, cerr)
	}
	return nil
}
