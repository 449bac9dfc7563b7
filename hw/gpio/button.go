package gpio

import (
	"fmt"
	"time"
)

// The approval button (issue 30): a push button on an input line and an
// optional LED on an output line, held for the life of the root helper.
// Button is the small interface over both, with a Linux implementation on
// the character device's edge events (button_linux.go) and a simulated
// one (SimButton) for laptop mode and the tests. What a press means is
// decided by Classify, a pure function over timestamped edges, so the
// rules (debounce, long press, a hold never released) are table-tested
// without a line.

// ButtonConfig is how the button is wired ([guard.button]).
type ButtonConfig struct {
	Pin       int           // BCM pin of the input
	Pull      Pull          // bias of the input
	ActiveLow bool          // a press reads 0
	Debounce  time.Duration // a level counts once held this long
	LED       int           // BCM pin of the LED, -1 for none
}

// Edge is one change of the button's logical level: Pressed after it,
// at Time (the kernel's timestamp where there is one).
type Edge struct {
	Time    time.Time
	Pressed bool
}

// Button is the approval button's lines as the helper holds them.
type Button interface {
	// Edges delivers every edge of the input, in order, until Close. A
	// consumer that falls behind loses edges rather than stalling the
	// line's watch (the channel is buffered).
	Edges() <-chan Edge
	// Pressed samples the input's logical level now.
	Pressed() (bool, error)
	// SetLED turns the LED on or off; without one it does nothing.
	SetLED(on bool) error
	// Close releases both lines.
	Close() error
}

// ButtonOpener requests the button's lines: the Linux character device,
// or the simulated board.
type ButtonOpener interface {
	OpenButton(cfg ButtonConfig) (Button, error)
}

// edgeBuffer is how many edges a Button keeps for a slow reader: a bouncing
// contact makes dozens per press.
const edgeBuffer = 256

// Check validates cfg before any line is requested.
func (cfg ButtonConfig) Check() error {
	if cfg.Pin < 0 {
		return fmt.Errorf("gpio: button pin %d: %w", cfg.Pin, ErrNoSuchPin)
	}
	if cfg.LED == cfg.Pin {
		return fmt.Errorf("gpio: button pin %d is also its LED", cfg.Pin)
	}
	if cfg.Pull != PullNone && cfg.Pull != PullUp && cfg.Pull != PullDown {
		return fmt.Errorf("gpio: button pin %d: pull %q is not none, up or down", cfg.Pin, cfg.Pull)
	}
	if cfg.Debounce <= 0 || cfg.Debounce > time.Second {
		return fmt.Errorf("gpio: button pin %d: debounce %s is outside (0, 1s]", cfg.Pin, cfg.Debounce)
	}
	return nil
}

// Press is what Classify makes of a wait's edges.
type Press string

// The presses. PressNone means nothing decided yet.
const (
	PressNone  Press = ""
	PressShort Press = "short"
	PressLong  Press = "long"
)

// PressRule is how presses are told apart ([guard.button] debounce and
// long_press).
type PressRule struct {
	Debounce  time.Duration // a level held shorter than this is a bounce
	LongPress time.Duration // a press held at least this long is long
}

// Classify decides what the owner did during a wait that began at start,
// from the edges seen since (older ones are ignored) and the level at
// start, looking at the wait at now. final says now is the wait's end.
//
//   - Only a press that starts after start counts: a button already down
//     at start must be released first, so a press made before the call
//     (or a stuck button) never approves it.
//   - A level counts once it has held for Debounce: an edge undone within
//     Debounce is a bounce, and both edges are ignored.
//   - A press released before LongPress is short (approve); one held for
//     LongPress is long (decline) at once, without waiting for the
//     release.
//   - At the end (final), a press under way whose release was never seen
//     is long: a decline is the safe reading of a hold cut short.
//
// It returns PressNone while nothing is decided.
func (r PressRule) Classify(pressedAtStart bool, edges []Edge, start, now time.Time, final bool) Press {
	level := pressedAtStart // the debounced level
	var down time.Time      // when the counted press began; zero when none is under way
	for i, e := range edges {
		if e.Time.Before(start) || e.Time.After(now) || e.Pressed == level {
			continue
		}
		// e changes the level; it counts if nothing undoes it within Debounce.
		until := now
		if j := nextChange(edges, i, now); j >= 0 {
			until = edges[j].Time
		}
		if until.Sub(e.Time) < r.Debounce {
			if until.Equal(now) && !final {
				break // too young to tell: decide at a later look
			}
			continue
		}
		level = e.Pressed
		switch {
		case level:
			down = e.Time
		case !down.IsZero():
			if e.Time.Sub(down) >= r.LongPress {
				return PressLong
			}
			return PressShort
		}
	}
	if !down.IsZero() && level {
		if now.Sub(down) >= r.LongPress || final {
			return PressLong
		}
	}
	return PressNone
}

// nextChange is the index of the first edge after i, before or at now,
// whose level differs from edges[i]'s, or -1.
func nextChange(edges []Edge, i int, now time.Time) int {
	for j := i + 1; j < len(edges); j++ {
		if edges[j].Time.After(now) {
			return -1
		}
		if edges[j].Pressed != edges[i].Pressed {
			return j
		}
	}
	return -1
}
