package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/privhelper/client"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

// cmdSim is `raspi-mcp sim press`: the owner's finger on the simulated
// board's approval button, through the laptop-mode helper's button.press
// (issue 30). Only laptop mode has a button a command can press: a real
// board's helper does not serve button.press, and its button is pressed by
// hand.
func cmdSim(args []string) error {
	cmd := newCommand("sim press", "[--long] [--wait DURATION] [--dir DIR]",
		"press the simulated board's approval button: short approves the call waiting, --long declines it")
	if len(args) == 0 || args[0] != "press" {
		sub := ""
		if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
			sub, args = args[0], args[1:]
		}
		return groupUsage("sim", "act on the simulated board of laptop mode", sub, args, "raspi-mcp sim press [--long] [--dir DIR]")
	}
	var w where
	cmd.fs.StringVar(&w.dir, "dir", "", "the `DIR` of a laptop-mode agent started with serve --sim --dir DIR (default "+simDir("")+")")
	long := cmd.fs.Bool("long", false, "hold the button past [guard.button] long_press: declines the call waiting")
	wait := cmd.fs.Duration("wait", 0, "first wait up to this long for a call to wait for the button (as a person waits for the LED to blink)")
	pos, err := cmd.parse(args[1:])
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return cmd.wrongArgs("sim press takes no arguments")
	}
	dir := w.dir
	if dir == "" {
		dir = simDir("")
	}
	if _, err := os.Stat(filepath.Join(dir, "config.toml")); err != nil {
		return &exitError{code: 1, msg: fmt.Sprintf("no laptop-mode device in %s (%v).\n  start one: raspi-mcp serve --sim%s; on a Pi, press the button itself", dir, err, dirFlag(w.dir))}
	}
	cfg, err := config.Load(filepath.Join(dir, "config.toml"))
	if err != nil {
		return err
	}
	c := client.New(client.Options{Socket: cfg.Helper.Socket, ClientName: "raspi-mcp-sim/" + version, Timeout: cfg.Guard.Button.LongPress.D() + 10*time.Second})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), *wait+cfg.Guard.Button.LongPress.D()+15*time.Second)
	defer cancel()
	for deadline := time.Now().Add(*wait); ; time.Sleep(50 * time.Millisecond) {
		st, err := client.Call(ctx, c, proto.ButtonStatus, proto.ButtonStatusReq{})
		if err != nil || st.Waiting || !time.Now().Before(deadline) {
			break
		}
	}
	p, err := client.Call(ctx, c, proto.ButtonPress, proto.ButtonPressReq{Long: *long})
	if err != nil {
		if proto.CodeOf(err) == proto.CodeUnavailable {
			return &exitError{code: 1, msg: fmt.Sprintf("%v\n  is laptop mode running? raspi-mcp serve --sim%s", err, dirFlag(w.dir))}
		}
		return &exitError{code: 1, msg: err.Error()}
	}
	what := "approves the call waiting, if any"
	if p.Press == proto.PressLong {
		what = "declines the call waiting, if any"
	}
	fmt.Printf("pressed the approval button on GPIO%d: %s (held %d ms); it %s\n", cfg.Guard.Button.Pin, p.Press, p.HeldMS, what)
	return nil
}

func dirFlag(dir string) string {
	if dir == "" {
		return ""
	}
	return " --dir " + dir
}
