//go:build linux

package gpio

import (
	"errors"
	"fmt"

	"github.com/warthog618/go-gpiocdev"
	"golang.org/x/sys/unix"
)

// NewLinux scans /dev/gpiochip* and returns a Controller whose requests
// carry the consumer label (1..31 bytes; DefaultConsumer normally). It
// fails only if gpiochips exist and none can be opened; with no chips at
// all every pin is ErrNoSuchPin.
func NewLinux(consumer string) (*Linux, error) {
	return newLinux(consumer, cdev{})
}

// cdev is the backend over the GPIO character device, uAPI v2 (Linux 5.10
// or later: bias needs it). It keeps no state: every call opens what it
// needs, and a requested line owns its own file descriptor.
type cdev struct{}

func (cdev) scan() ([]chipLines, error) {
	names := gpiocdev.Chips() // natural order
	var out []chipLines
	var errs []error
	for _, name := range names {
		c, err := gpiocdev.NewChip(name)
		if err != nil {
			errs = append(errs, fmt.Errorf("open %s: %w", name, err))
			continue
		}
		cl := chipLines{Name: c.Name, Label: c.Label, Lines: make([]string, c.Lines())}
		for off := range cl.Lines {
			// An unreadable line stays unnamed; it cannot be looked up.
			if li, err := c.LineInfo(off); err == nil {
				cl.Lines[off] = li.Name
			}
		}
		c.Close()
		out = append(out, cl)
	}
	if len(out) == 0 && len(errs) > 0 {
		return nil, fmt.Errorf("gpio: no usable gpiochip: %w", errors.Join(errs...))
	}
	return out, nil
}

func (cdev) info(ref lineRef) (lineInfo, error) {
	c, err := gpiocdev.NewChip(ref.Chip)
	if err != nil {
		return lineInfo{}, err
	}
	defer c.Close()
	li, err := c.LineInfo(ref.Offset)
	if err != nil {
		return lineInfo{}, err
	}
	return toLineInfo(li), nil
}

// toLineInfo translates go-gpiocdev's view of a line.
func toLineInfo(li gpiocdev.LineInfo) lineInfo {
	info := lineInfo{Used: li.Used, Consumer: li.Consumer, Mode: Unknown, Pull: Unknown}
	switch li.Config.Direction {
	case gpiocdev.LineDirectionInput:
		info.Mode = string(Input)
	case gpiocdev.LineDirectionOutput:
		info.Mode = string(Output)
	}
	switch li.Config.Bias {
	case gpiocdev.LineBiasDisabled:
		info.Pull = string(PullNone)
	case gpiocdev.LineBiasPullUp:
		info.Pull = string(PullUp)
	case gpiocdev.LineBiasPullDown:
		info.Pull = string(PullDown)
	}
	return info
}

func (cdev) request(ref lineRef, consumer string, cfg lineConfig) (requestedLine, error) {
	opts := []gpiocdev.LineReqOption{gpiocdev.WithConsumer(consumer)}
	for _, o := range configOptions(cfg) {
		opts = append(opts, o)
	}
	l, err := gpiocdev.RequestLine(ref.Chip, ref.Offset, opts...)
	if errors.Is(err, unix.EBUSY) {
		return nil, ErrBusy
	}
	if err != nil {
		return nil, err
	}
	return cdevLine{l}, nil
}

// option is a go-gpiocdev option valid both when requesting a line and
// when reconfiguring it, so request and reconfigure share one translation.
type option interface {
	gpiocdev.LineReqOption
	gpiocdev.LineConfigOption
}

// configOptions are the go-gpiocdev options for cfg. Pull "" adds no bias
// option, which leaves the line's bias as it is.
func configOptions(cfg lineConfig) []option {
	var opts []option
	if cfg.Mode == Output {
		opts = append(opts, gpiocdev.AsOutput(cfg.Initial))
	} else {
		opts = append(opts, gpiocdev.AsInput)
	}
	switch cfg.Pull {
	case PullNone:
		opts = append(opts, gpiocdev.WithBiasDisabled)
	case PullUp:
		opts = append(opts, gpiocdev.WithPullUp)
	case PullDown:
		opts = append(opts, gpiocdev.WithPullDown)
	}
	return opts
}

// cdevLine is a held go-gpiocdev line.
type cdevLine struct{ l *gpiocdev.Line }

func (c cdevLine) value() (int, error)  { return c.l.Value() }
func (c cdevLine) setValue(v int) error { return c.l.SetValue(v) }
func (c cdevLine) close() error         { return c.l.Close() }

func (c cdevLine) reconfigure(cfg lineConfig) error {
	var opts []gpiocdev.LineConfigOption
	for _, o := range configOptions(cfg) {
		opts = append(opts, o)
	}
	return c.l.Reconfigure(opts...)
}
