package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/raspi-mcp/raspi-mcp/agent/store"
	"github.com/raspi-mcp/raspi-mcp/agent/tool"
	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/hw/gpio"
	"github.com/raspi-mcp/raspi-mcp/internal/identity"
	"github.com/raspi-mcp/raspi-mcp/privhelper/client"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

// GpioPinInfo is one pin as the GPIO tools report it: number, mode, level and
// whether this device lets a model use it (the tool catalog's GpioPinInfo,
// spec 002 §5.1), with additive fields.
type GpioPinInfo struct {
	Pin      int    `json:"pin"`
	Mode     string `json:"mode" jsonschema:"input, output, alt or unknown"`
	Value    string `json:"value,omitempty" jsonschema:"high or low; absent when unknown"`
	Allowed  bool   `json:"allowed"`
	Name     string `json:"name,omitempty" jsonschema:"what the owner says the pin drives"`
	Pull     string `json:"pull,omitempty"`
	Consumer string `json:"consumer,omitempty" jsonschema:"process holding the line, when not raspi-mcp"`
	PWM      bool   `json:"pwm_allowed,omitempty"`
	DryRun   bool   `json:"dry_run,omitempty"`
}

// gpioListOut is gpio.list_pins.
type gpioListOut struct {
	Pins []GpioPinInfo `json:"pins"`
}

// gpioReadIn names a pin.
type gpioReadIn struct {
	Pin int `json:"pin" jsonschema:"BCM number"`
}

// gpioConfigureIn is gpio.configure_pin: a pin's mode (input or output) and pull
// (tool catalog, spec 002 §5.2).
type gpioConfigureIn struct {
	Pin  int    `json:"pin" jsonschema:"BCM number"`
	Mode string `json:"mode"`
	Pull string `json:"pull,omitempty"`
	tool.GuardArgs
}

// gpioWriteIn is gpio.write_pin: the level and, optionally, how long to hold it
// before it reverts (tool catalog, spec 002 §5.3).
type gpioWriteIn struct {
	Pin        int    `json:"pin" jsonschema:"BCM number"`
	Value      string `json:"value"`
	DurationMS *int   `json:"duration_ms,omitempty" jsonschema:"revert after this long; omit to keep"`
	tool.GuardArgs
}

// levelSpelling takes 1 and 0 for "high" and "low", as the tool catalog's
// example request writes a pin ("value": 1, spec 002 §2.6.2), while the schema
// keeps the one string enum.
func levelSpelling(args map[string]any) {
	switch args["value"] {
	case 1.0, "1":
		args["value"] = "high"
	case 0.0, "0":
		args["value"] = "low"
	}
}

// GPIOWriteOut is the pin after the write.
type GPIOWriteOut struct {
	GpioPinInfo
	Previous string `json:"previous,omitempty"`
	RevertAt string `json:"revert_at,omitempty"`
	RevertTo string `json:"revert_to,omitempty"`
	DryRun   bool   `json:"dry_run,omitempty"`
}

// gpioPWMIn is gpio.set_pwm: a frequency in Hz and a duty cycle in percent (tool
// catalog, spec 002 §5.4).
type gpioPWMIn struct {
	Pin              int     `json:"pin" jsonschema:"BCM number"`
	FrequencyHz      float64 `json:"frequency_hz"`
	DutyCyclePercent float64 `json:"duty_cycle_percent"`
	tool.GuardArgs
}

// gpioPWMOut is the effective PWM state.
type gpioPWMOut struct {
	Pin              int     `json:"pin"`
	FrequencyHz      float64 `json:"frequency_hz"`
	DutyCyclePercent float64 `json:"duty_cycle_percent"`
	Enabled          bool    `json:"enabled"`
	Chip             string  `json:"chip,omitempty"`
	Channel          int     `json:"channel"`
	DryRun           bool    `json:"dry_run,omitempty"`
}

// gpioTools are the gpio namespace's tools: the allowlist they read, the
// helper that drives the pins, and the leases a timed write leaves.
type gpioTools struct {
	conf   func() *config.Config
	helper *client.Client
	store  *store.DB           // pending lease reverts
	wake   func()              // tells the reverter a lease was added
	wire   func(string) string // a tool's wire name, for suggested calls
}

func (a *Agent) registerGPIO() {
	(&gpioTools{conf: a.conf, helper: a.helper, store: a.store, wake: a.reverter.wake, wire: a.wire}).register(a.tools)
}

func (g *gpioTools) register(r *tool.Registry) {
	gate := config.SwitchGPIOWrites
	pinProp := tool.P("pin", tool.Min(1), tool.Max(proto.MaxPin)) // the tool catalog's pin schemas start at 1 (spec 002 §5)
	tool.Add(r, tool.Spec[noArgs, gpioListOut]{
		ID: "gpio.list_pins", Title: "GPIO pins",
		Description: "The allowed GPIO pins (BCM) with name, mode, value and pull.",
		Rule:        tool.Rule{MinRole: identity.RoleRead},
		Run:         func(ctx context.Context, _ *tool.Call, _ noArgs) (gpioListOut, error) { return g.list(ctx) },
		Summary:     func(_ noArgs, o gpioListOut) string { return fmt.Sprintf("%d allowed pins", len(o.Pins)) },
	})
	tool.Add(r, tool.Spec[gpioReadIn, GpioPinInfo]{
		ID: "gpio.read_pin", Title: "Read a GPIO pin",
		Description: "Read an allowed pin's level.",
		Rule:        tool.Rule{MinRole: identity.RoleRead},
		Props:       []tool.Prop{pinProp},
		Example:     &gpioReadIn{Pin: 17},
		Run: func(ctx context.Context, _ *tool.Call, in gpioReadIn) (GpioPinInfo, error) {
			if _, err := g.allowedPin(in.Pin); err != nil {
				return GpioPinInfo{}, err
			}
			p, err := client.Call(ctx, g.helper, proto.GPIORead, proto.GPIOReadReq{Pin: in.Pin})
			if err != nil {
				return GpioPinInfo{}, err
			}
			return g.pinInfo(p), nil
		},
		Summary: func(in gpioReadIn, o GpioPinInfo) string {
			return fmt.Sprintf("GPIO%d is %s (%s)", in.Pin, o.Value, o.Mode)
		},
	})
	tool.Add(r, tool.Spec[gpioConfigureIn, GpioPinInfo]{
		ID: "gpio.configure_pin", Title: "Configure a GPIO pin",
		Description: "Set an allowed pin to input or output.",
		Rule:        tool.Rule{MinRole: identity.RoleOperate, Risk: tool.RiskLow, Gate: gate},
		Idempotent:  true,
		Props:       []tool.Prop{pinProp, tool.P("mode", tool.Enum("input", "output")), tool.P("pull", tool.Enum("none", "up", "down"), tool.Default("none"))},
		Example:     &gpioConfigureIn{Pin: 17, Mode: "output"},
		Run:         g.configure,
		Summary: func(in gpioConfigureIn, o GpioPinInfo) string {
			return fmt.Sprintf("GPIO%d configured as %s, pull %s", in.Pin, in.Mode, in.Pull)
		},
	})
	tool.Add(r, tool.Spec[gpioWriteIn, GPIOWriteOut]{
		ID: "gpio.write_pin", Title: "Write a GPIO pin",
		Description: "Drive an allowed output pin high or low; with duration_ms it reverts afterwards, even across restarts.",
		Rule:        tool.Rule{MinRole: identity.RoleOperate, Risk: tool.RiskLow, Gate: gate},
		Props:       []tool.Prop{pinProp, tool.P("value", tool.Enum("high", "low")), tool.P("duration_ms", tool.Min(1), tool.Max(600000))},
		Spelling:    levelSpelling,
		Example:     &gpioWriteIn{Pin: 17, Value: "high"},
		Run:         g.write,
		Summary: func(in gpioWriteIn, o GPIOWriteOut) string {
			s := fmt.Sprintf("GPIO%d set %s", in.Pin, in.Value)
			if o.DryRun {
				s = fmt.Sprintf("would set GPIO%d %s", in.Pin, in.Value)
			}
			if o.RevertAt != "" {
				s += fmt.Sprintf(", back to %s at %s", o.RevertTo, o.RevertAt)
			}
			return s
		},
	})
	tool.Add(r, tool.Spec[gpioPWMIn, gpioPWMOut]{
		ID: "gpio.set_pwm", Title: "Hardware PWM",
		Description: "Set hardware PWM on an allowed pin with a PWM channel.",
		Rule:        tool.Rule{MinRole: identity.RoleOperate, Risk: tool.RiskLow, Gate: gate},
		Idempotent:  true,
		Props:       []tool.Prop{pinProp, tool.P("frequency_hz", tool.Min(1), tool.Max(proto.MaxPWMHz)), tool.P("duty_cycle_percent", tool.Min(0), tool.Max(100))},
		Example:     &gpioPWMIn{Pin: 18, FrequencyHz: 1000, DutyCyclePercent: 50},
		Run:         g.setPWM,
		Summary: func(in gpioPWMIn, o gpioPWMOut) string {
			return fmt.Sprintf("PWM on GPIO%d: %.0f Hz, %.1f%%", in.Pin, o.FrequencyHz, o.DutyCyclePercent)
		},
	})
}

// allowedPin checks the [gpio] pins allowlist, and that the approval
// button ([guard.button]) does not hold the pin; the helper checks both
// again. config.Validate refuses the overlap, so the second check is
// defence in depth: no tool may watch for, or fake, the owner's approval.
func (g *gpioTools) allowedPin(pin int) (config.Pin, error) {
	if slices.Contains(g.conf().Guard.ReservedPins(), pin) {
		return config.Pin{}, tool.Errf(CodePermissionDenied, "GPIO%d is reserved by guard.button (the approval button or its LED): no tool may configure, read or write it", pin).
			With("parameter", "pin").With("pin", pin).With("config_key", "[guard.button]").
			Hint("the approval button's pins belong to the device's owner; use another pin").
			Suggest(tool.SuggestedCall{Tool: g.wire("gpio.list_pins"), Why: "see the pins this device allows"})
	}
	p, ok := g.conf().GPIO.Pin(pin)
	if !ok {
		allowed := []int{}
		for _, q := range g.conf().GPIO.Pins {
			allowed = append(allowed, q.Pin)
		}
		sort.Ints(allowed)
		return config.Pin{}, tool.Errf(CodePermissionDenied, "GPIO%d is not in this device's allowlist", pin).
			With("parameter", "pin").With("allowed_pins", allowed).
			Hint("the owner lists allowed pins in [gpio] pins of " + config.DefaultPath).
			Suggest(tool.SuggestedCall{Tool: g.wire("gpio.list_pins"), Why: "see the allowed pins and what they drive"})
	}
	return p, nil
}

func level(v *int) string {
	switch {
	case v == nil:
		return ""
	case *v == 1:
		return "high"
	}
	return "low"
}

func (g *gpioTools) pinInfo(p proto.GPIOPin) GpioPinInfo {
	c, _ := g.conf().GPIO.Pin(p.Pin)
	info := GpioPinInfo{Pin: p.Pin, Mode: p.Mode, Value: level(p.Value), Allowed: true, Name: c.Name, Pull: p.Pull, PWM: c.PWM}
	if p.Consumer != "" && p.Consumer != "raspi-mcp" {
		info.Consumer = p.Consumer
	}
	return info
}

func (g *gpioTools) list(ctx context.Context) (gpioListOut, error) {
	out := gpioListOut{Pins: []GpioPinInfo{}}
	if len(g.conf().GPIO.Pins) == 0 {
		return out, nil
	}
	pins := make([]int, 0, len(g.conf().GPIO.Pins))
	reserved := g.conf().Guard.ReservedPins()
	for _, p := range g.conf().GPIO.Pins {
		if !slices.Contains(reserved, p.Pin) { // the approval button's: never listed
			pins = append(pins, p.Pin)
		}
	}
	if len(pins) == 0 {
		return out, nil
	}
	st, err := client.Call(ctx, g.helper, proto.GPIOState, proto.GPIOStateReq{Pins: pins})
	if err != nil {
		return out, err
	}
	for _, p := range st.Pins {
		out.Pins = append(out.Pins, g.pinInfo(p))
	}
	sort.Slice(out.Pins, func(i, j int) bool { return out.Pins[i].Pin < out.Pins[j].Pin })
	return out, nil
}

func (g *gpioTools) configure(ctx context.Context, c *tool.Call, in gpioConfigureIn) (GpioPinInfo, error) {
	if _, err := g.allowedPin(in.Pin); err != nil {
		return GpioPinInfo{}, err
	}
	req := proto.GPIOConfigureReq{Pin: in.Pin, Mode: in.Mode, Pull: in.Pull}
	if c.DryRun {
		st, err := client.Call(ctx, g.helper, proto.GPIOState, proto.GPIOStateReq{Pins: []int{in.Pin}})
		if err != nil {
			return GpioPinInfo{}, err
		}
		info := g.pinInfo(st.Pins[0])
		info.Mode, info.Pull, info.DryRun = in.Mode, in.Pull, true
		return info, nil
	}
	p, err := client.Call(ctx, g.helper, proto.GPIOConfigure, req)
	if err != nil {
		return GpioPinInfo{}, err
	}
	return g.pinInfo(p), nil
}

func (g *gpioTools) write(ctx context.Context, c *tool.Call, in gpioWriteIn) (GPIOWriteOut, error) {
	if _, err := g.allowedPin(in.Pin); err != nil {
		return GPIOWriteOut{}, err
	}
	v := 0
	if in.Value == "high" {
		v = 1
	}
	if c.DryRun {
		st, err := client.Call(ctx, g.helper, proto.GPIOState, proto.GPIOStateReq{Pins: []int{in.Pin}})
		if err != nil {
			return GPIOWriteOut{}, err
		}
		out := GPIOWriteOut{GpioPinInfo: g.pinInfo(st.Pins[0]), DryRun: true}
		out.Previous, out.Value = out.Value, in.Value
		if st.Pins[0].Mode != "output" {
			return GPIOWriteOut{}, g.notOutput(in.Pin, st.Pins[0].Mode)
		}
		return out, nil
	}
	// A lease already running on this pin keeps its original revert value:
	// renewing it must not make the leased value permanent.
	pending, hasPending, err := g.store.GPIORevertOf(in.Pin)
	if err != nil {
		return GPIOWriteOut{}, err
	}
	p, err := client.Call(ctx, g.helper, proto.GPIOWrite, proto.GPIOWriteReq{Pin: in.Pin, Value: v})
	if pe := (*proto.Error)(nil); errors.As(err, &pe) && pe.Code == CodeFailedPrecondition && strings.Contains(pe.Message, gpio.ErrNotOutput.Error()) {
		return GPIOWriteOut{}, g.notOutput(in.Pin, "")
	}
	if err != nil {
		return GPIOWriteOut{}, err
	}
	out := GPIOWriteOut{GpioPinInfo: g.pinInfo(p), Previous: level(p.Previous)}
	switch {
	case in.DurationMS != nil:
		back := 1 - v
		if g.conf().GPIO.Revert == "previous" && p.Previous != nil {
			back = *p.Previous
		}
		if hasPending {
			back = pending.Value
		}
		r := store.GPIORevert{Pin: in.Pin, Value: back, Due: time.Now().Add(time.Duration(*in.DurationMS) * time.Millisecond),
			Principal: c.Principal.Name, CorrelationID: c.CorrelationID}
		if err := g.store.PutGPIORevert(r); err != nil {
			return GPIOWriteOut{}, err
		}
		g.wake()
		out.RevertAt, out.RevertTo = r.Due.UTC().Format(time.RFC3339Nano), level(&back)
	case hasPending:
		// A permanent write ends any lease on the pin.
		if err := g.store.DeleteGPIORevert(in.Pin); err != nil {
			return GPIOWriteOut{}, err
		}
	}
	return out, nil
}

// notOutput is a write to a pin that is not an output, with the call that makes it one.
// mode is the pin's mode when known, "" when the helper refused the write.
func (g *gpioTools) notOutput(pin int, mode string) *tool.Error {
	e := tool.Errf(CodeFailedPrecondition, "GPIO%d is not an output", pin).With("pin", pin)
	if mode != "" {
		e = tool.Errf(CodeFailedPrecondition, "GPIO%d is %s, not an output", pin, mode).With("pin", pin).With("mode", mode)
	}
	return e.Hint("configure the pin as an output with gpio_configure_pin, then write again").
		Suggest(tool.SuggestedCall{Tool: g.wire("gpio.configure_pin"), Arguments: map[string]any{"pin": pin, "mode": "output"},
			Why: "make it an output first"})
}

func (g *gpioTools) setPWM(ctx context.Context, c *tool.Call, in gpioPWMIn) (gpioPWMOut, error) {
	p, err := g.allowedPin(in.Pin)
	if err != nil {
		return gpioPWMOut{}, err
	}
	if !p.PWM {
		return gpioPWMOut{}, tool.Errf(CodePermissionDenied, "PWM is not allowed on GPIO%d", in.Pin).With("parameter", "pin").
			Hint("the owner sets pwm = true on the pin in [gpio] pins")
	}
	if c.DryRun {
		return gpioPWMOut{Pin: in.Pin, FrequencyHz: in.FrequencyHz, DutyCyclePercent: in.DutyCyclePercent, DryRun: true}, nil
	}
	st, err := client.Call(ctx, g.helper, proto.PWMSet, proto.PWMSetReq{Pin: in.Pin, FrequencyHz: in.FrequencyHz, DutyCyclePercent: in.DutyCyclePercent})
	if err != nil {
		return gpioPWMOut{}, err
	}
	return gpioPWMOut{Pin: st.Pin, FrequencyHz: st.FrequencyHz, DutyCyclePercent: st.DutyCyclePercent, Enabled: st.Enabled, Chip: st.Chip, Channel: st.Channel}, nil
}
