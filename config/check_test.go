package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// problemsOf loads main (and drop-ins, name -> TOML) from a temp dir and
// returns what Load found wrong.
func problemsOf(t *testing.T, main string, dropins map[string]string) (string, Problems) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(path, []byte(main), 0o644); err != nil {
		t.Fatal(err)
	}
	if len(dropins) > 0 {
		if err := os.Mkdir(filepath.Join(dir, "config.d"), 0o755); err != nil {
			t.Fatal(err)
		}
		for name, data := range dropins {
			if err := os.WriteFile(filepath.Join(dir, "config.d", name), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	_, err := Load(path)
	var ps Problems
	if err != nil && !errors.As(err, &ps) {
		t.Fatalf("Load: %v, want Problems", err)
	}
	return path, ps
}

// The file of issue 32: a misspelt table, a number for a duration, a bad
// value further down. All three come back from one run, in line order,
// each naming its line, the misspelling with the name meant.
func TestLoadReportsEveryProblemWithItsLine(t *testing.T) {
	path, ps := problemsOf(t, "[sytem]\nreboot = true\n\n[system]\nmin_power_interval = 5\n\n[gpio]\nrevert = \"back\"\n", nil)
	want := Problems{
		{File: path, Line: 1, Msg: "unknown table [sytem]: did you mean [system]?"},
		{File: path, Line: 5, Key: "system.min_power_interval", Msg: `want a duration like "10m", got the number 5`},
		{File: path, Line: 8, Key: "gpio.revert", Msg: `want previous or inverse, got "back"`},
	}
	if len(ps) != len(want) {
		t.Fatalf("problems:\n%v\nwant %d", ps, len(want))
	}
	for i := range want {
		if ps[i] != want[i] {
			t.Errorf("problem %d = %+v, want %+v", i, ps[i], want[i])
		}
	}
	if lines := strings.Split(ps.Error(), "\n"); len(lines) != 3 || lines[0] != "config: "+path+":1: unknown table [sytem]: did you mean [system]?" {
		t.Errorf("Error() = %q", ps.Error())
	}
}

// Unknown keys get the nearest known key of their own table; a key too
// far from any gets the pointer to the example instead of a wild guess.
func TestUnknownKeysSuggest(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"[system]\nreboots = true\n", `unknown key "system.reboots": did you mean "system.reboot"?`},
		{"[guard.button]\npinn = 5\n", `unknown key "guard.button.pinn": did you mean "guard.button.pin"?`},
		{"[gpio]\npins = [{ pin = 5, mode = \"input\", mdoe = \"x\" }]\n", `unknown key "gpio.pins.mdoe": did you mean "gpio.pins.mode"?`},
		{"[profiles.s]\ntoolset = [\"gpio\"]\n", `unknown key "profiles.s.toolset": did you mean "profiles.s.toolsets"?`},
		{"[gpoi]\nenabled = true\n", "unknown table [gpoi]: did you mean [gpio]?"},
		{"[system]\nfrobnicate = true\n", `unknown key "system.frobnicate" (config.example.toml has every key)`},
	} {
		_, err := Parse([]byte(tc.in))
		var ps Problems
		if !errors.As(err, &ps) || len(ps) != 1 || ps[0].Msg != tc.want || ps[0].Line == 0 {
			t.Errorf("Parse(%q) = %#v, want one problem %q with its line", tc.in, err, tc.want)
		}
	}
}

// A wrong type says what the key wants and what the file gave, in the
// owner's words, never the decoder's Go type names.
func TestWrongTypeInPlainWords(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"[system]\nreboot = \"yes\"\n", `system.reboot: want true or false, got the string "yes"`},
		{"[http]\nburst = 1.5\n", "http.burst: want a whole number, got the number 1.5"},
		{"[service]\nallow = \"nginx\"\n", `service.allow: want a list of strings, like ["a", "b"], got the string "nginx"`},
		{"[gpio]\npins = 17\n", "gpio.pins: want a list of tables, like [[gpio.pins]], got the number 17"},
		{"system = true\n", "system: want a table, like [system], got true"},
		{"[gpio]\npins = [{ pin = \"17\", mode = \"input\" }]\n", "gpio.pins.pin: want a whole number, got a string"},
	} {
		_, err := Parse([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "incompatible") || strings.Contains(err.Error(), "int64") {
			t.Errorf("Parse(%q) = %v, want %q", tc.in, err, tc.want)
		}
	}
}

// A drop-in's problem names the drop-in and its line; a value it set that
// Validate refuses is placed there too, not on the main file.
func TestDropInProblemsNameTheirFile(t *testing.T) {
	path, ps := problemsOf(t, "[system]\nreboot = true\n", map[string]string{
		"10-a.toml": "# gpio\n[gpio]\nwritez = true\n",
		"20-b.toml": "[agent]\n\nlog_level = \"loud\"\n",
	})
	dir := filepath.Join(filepath.Dir(path), "config.d")
	want := []string{
		"config: " + filepath.Join(dir, "10-a.toml") + `:3: unknown key "gpio.writez": did you mean "gpio.writes"?`,
		"config: " + filepath.Join(dir, "20-b.toml") + `:3: agent.log_level: want debug, info, warn or error, got "loud"`,
	}
	if got := strings.Split(ps.Error(), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", ps.Error(), strings.Join(want, "\n"))
	}
}

// A key whose type was wrong keeps its default: Validate says nothing more
// about it (one problem, not two for one mistake).
func TestNoSecondProblemForAWrongType(t *testing.T) {
	_, ps := problemsOf(t, "[gpio]\npins = [{ pin = 17, mode = \"output\" }, { pin = 18, mode = \"output\", value = \"x\" }]\n", nil)
	if len(ps) != 1 || ps[0].Key != "gpio.pins.value" || ps[0].Line != 2 {
		t.Errorf("problems: %v", ps)
	}
}

// A syntax error stops its file (nothing of it is read) and Validate, but
// a later drop-in's own problems are still reported.
func TestSyntaxErrorStillReportsOtherFiles(t *testing.T) {
	_, ps := problemsOf(t, "[system\n", map[string]string{"10-a.toml": "[gpio]\nwritez = true\n"})
	if len(ps) != 2 || ps[0].Line != 2 || !strings.Contains(ps[1].Msg, "gpio.writez") {
		t.Errorf("problems: %v", ps)
	}
}

// An output, PWM or button pin on a bus pin is a warning naming the bus;
// inputs and free pins are not; the laptop's simulated board is clean.
func TestPinWarnings(t *testing.T) {
	c, err := Parse([]byte("[gpio]\npins = [{ pin = 3, name = \"lamp\", mode = \"output\" }, { pin = 2, name = \"door\", mode = \"input\" }, { pin = 14, name = \"fan\", mode = \"input\", pwm = true }, { pin = 5, name = \"relay\", mode = \"output\" }]\n[guard.button]\npin = 9\n"))
	if err != nil {
		t.Fatal(err)
	}
	w := strings.Join(c.Warnings(), "\n")
	for _, want := range []string{`gpio.pins[0] ("lamp", output) is GPIO3, which carries I²C1 SCL`, `gpio.pins[2] ("fan", pwm) is GPIO14, which carries UART TX`, "guard.button.pin is GPIO9, which carries SPI0 MISO"} {
		if !strings.Contains(w, want) {
			t.Errorf("warnings lack %q:\n%s", want, w)
		}
	}
	if strings.Contains(w, "GPIO2,") || strings.Contains(w, "GPIO5,") {
		t.Errorf("warned about an input or a free pin:\n%s", w)
	}
	if PinUse(2) != "I²C1 SDA" || PinUse(10) != "SPI0 MOSI" || PinUse(15) != "UART RX" || PinUse(0) == "" || PinUse(5) != "" {
		t.Errorf("pin table: 2 %q 10 %q 15 %q 0 %q 5 %q", PinUse(2), PinUse(10), PinUse(15), PinUse(0), PinUse(5))
	}
	if w := Laptop(t.TempDir(), "me").pinWarnings(); len(w) != 0 {
		t.Errorf("the simulated board warns: %v", w)
	}
}

// The two message parsers that stand in for regexps (config is linked into
// the root helper): a validator's key prefix and the decoder's type message.
func TestMessageParsers(t *testing.T) {
	for msg, want := range map[string]Problem{
		"gpio.pins[0].pin: want 1..53":     {Key: "gpio.pins[0].pin", Msg: "want 1..53"},
		"profiles.Sensor-1: bad":           {Key: "profiles.Sensor-1", Msg: "bad"},
		"upstream[2].rules[10].role: nope": {Key: "upstream[2].rules[10].role", Msg: "nope"},
		"Gpio.pins: x":                     {Msg: "Gpio.pins: x"},
		"gpio.pins[a]: x":                  {Msg: "gpio.pins[a]: x"},
		"two words: x":                     {Msg: "two words: x"},
		"no key here":                      {Msg: "no key here"},
	} {
		if got := splitKey(msg); got != want {
			t.Errorf("splitKey(%q) = %+v, want %+v", msg, got, want)
		}
	}
	line, key, have, dest, ok := libraryType(`toml: line 7 (last key "gpio.pins.value"): incompatible types: TOML value has type string; destination has type integer`)
	if !ok || line != 7 || key != "gpio.pins.value" || have != "string" || dest != "integer" {
		t.Errorf("libraryType: %d %q %q %q %v", line, key, have, dest, ok)
	}
	if line, _, _, _, ok := libraryType(`(last key "a"): incompatible types: TOML value has type bool; destination has type string`); !ok || line != 0 {
		t.Errorf("libraryType without a line: %d %v", line, ok)
	}
	if _, _, _, _, ok := libraryType("toml: something else"); ok {
		t.Error("libraryType read a message that is not one")
	}
}
