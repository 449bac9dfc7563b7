package config

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The example file documents every key with its default: it must parse to
// exactly Default(), and every key Default() has must appear in it.
func TestExampleIsDefault(t *testing.T) {
	data, err := os.ReadFile("../config.example.toml")
	if err != nil {
		t.Fatal(err)
	}
	got, err := Parse(data)
	if err != nil {
		t.Fatalf("example does not parse: %v", err)
	}
	if !reflect.DeepEqual(got, Default()) {
		t.Fatalf("example differs from defaults:\n got  %+v\n want %+v", got, Default())
	}
	enc, err := Default().Encode()
	if err != nil {
		t.Fatal(err)
	}
	section := ""
	for _, line := range strings.Split(string(enc), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "[roles."):
			// Maps are written inline in the example: users = {...}.
			section = line
			key := strings.TrimSuffix(strings.TrimPrefix(line, "[roles."), "]")
			if !strings.Contains(string(data), "\n"+key+" = ") {
				t.Errorf("example lacks map %s", key)
			}
		case strings.HasPrefix(line, "["):
			section = line
			if !strings.Contains(string(data), line) {
				t.Errorf("example lacks section %s", line)
			}
		case strings.HasPrefix(section, "[roles."):
		case strings.Contains(line, " = "):
			key := strings.SplitN(line, " = ", 2)[0]
			if !strings.Contains(string(data), "\n"+key+" = ") {
				t.Errorf("example lacks key %s %s", section, key)
			}
		}
	}
}

func TestParseErrorsNameTheKey(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"[system]\nreboots = true\n", `unknown key "system.reboots"`},
		{"[system]\nreboot = \"yes\"\n", "system.reboot"},
		{"[nope]\nx = 1\n", "unknown table [nope]"},
		{"[roles]\nusers = { pi = \"root\" }\n", `roles.users.pi: want one of read, operate, admin, or one and a profile ("read:sensors"), got "root"`},
		{"[agent]\nsocket = \"relative.sock\"\n", "agent.socket: want an absolute path"},
		{"[change]\ntoken_ttl = \"forever\"\n", "token_ttl"},
		{"[change]\ntoken_ttl = \"2h\"\n", "change.token_ttl: want 1s..1h"},
		{"[guard]\nelicitation = \"sometimes\"\n", "guard.elicitation: want \"preferred\", \"required\" or \"off\""},
		{"[guard]\nelicitation_timeout = \"0s\"\n", "guard.elicitation_timeout: want 1s..1h"},
		{"[agent]\nlog_level = \"loud\"\n", "agent.log_level"},
		{"[agent]\ngc_percent = 0\n", "agent.gc_percent: want 25..10000"},
		{"[agent]\ngc_percent = -1\nmemory_limit_mib = 0\n", "agent.gc_percent: -1 needs a memory_limit_mib"},
		{"[agent]\nmemory_limit_mib = 2\n", "agent.memory_limit_mib"},
		{"[agent]\nmax_procs = -1\n", "agent.max_procs"},
		{"[helper]\ntimeout = \"0s\"\n", "helper.timeout"},
		{"[system\n", "line 2"},
		{"[gpio]\nrevert = \"back\"\n", "gpio.revert"},
		{"[gpio]\npins = [{ pin = 17, mode = \"output\" }, { pin = 17, mode = \"input\" }]\n", "gpio.pins[1].pin"},
		{"[gpio]\npins = [{ pin = 60, mode = \"output\" }]\n", "gpio.pins[0].pin"},
		{"[gpio]\npins = [{ pin = 17, mode = \"alt\" }]\n", "gpio.pins[0].mode"},
		{"[gpio]\npins = [{ pin = 17, mode = \"output\", value = 2 }]\n", "gpio.pins[0].value"},
		{"[gpio]\npins = [{ pin = 17, mode = \"output\", colour = \"red\" }]\n", "unknown key \"gpio.pins.colour\""},
		{"[i2c]\nread = [\"1\"]\n", "i2c.read"},
		{"[camera]\npublic_url = \"ftp://pi/media\"\n", "camera.public_url"},
		{"[camera]\npublic_url = \"http://pi/media?x=1\"\n", "camera.public_url"},
		{"[i2c]\nwrite = [\"1:0x90\"]\n", "i2c.write"},
		{"[i2c]\nsensors = [{ name = \"a\", type = \"dht22\", bus = 1, address = 0x40 }]\n", "i2c.sensors[0].type"},
		{"[i2c]\nsensors = [{ name = \"a\", type = \"tmp102\", bus = 1, address = 0x48 }, { name = \"a\", type = \"tmp102\", bus = 1, address = 0x49 }]\n", "i2c.sensors[1].name"},
	} {
		_, err := Parse([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want error containing %q", tc.in, err, tc.want)
		}
	}
}

func TestParseOverridesDefaults(t *testing.T) {
	c, err := Parse([]byte("[system]\nreboot = true\n[roles]\nusers = { pi = \"admin\" }\n[change]\ntoken_ttl = \"90s\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !c.System.Reboot || c.System.Shutdown || !c.System.Enabled {
		t.Errorf("system = %+v", c.System)
	}
	if c.Roles.Users["pi"] != "admin" || c.Roles.Groups["raspi-mcp"] != "read" {
		t.Errorf("roles = %+v", c.Roles)
	}
	if c.Change.TokenTTL.D() != 90*time.Second {
		t.Errorf("ttl = %s", c.Change.TokenTTL.D())
	}
}

func TestLaptopRoundTrips(t *testing.T) {
	c := Laptop("/tmp/x", "alice")
	enc, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(enc)
	if err != nil {
		t.Fatalf("laptop config does not re-parse: %v\n%s", err, enc)
	}
	if !reflect.DeepEqual(back, c) {
		t.Fatalf("round trip differs:\n%+v\n%+v", back, c)
	}
	if back.Roles.Users["alice"] != "admin" || !back.System.Shutdown || back.Agent.Socket != "/tmp/x/mcp.sock" {
		t.Errorf("laptop = %+v", back)
	}
}

func TestI2CAllowlist(t *testing.T) {
	list := []string{"1:0x76", "3:*"}
	for _, tc := range []struct {
		bus, addr int
		want      bool
	}{{1, 0x76, true}, {1, 0x77, false}, {3, 0x10, true}, {0, 0x76, false}} {
		if got := I2CAllowed(list, tc.bus, tc.addr); got != tc.want {
			t.Errorf("%d:0x%x = %v", tc.bus, tc.addr, got)
		}
	}
}

func TestOpsSettings(t *testing.T) {
	for _, bad := range []string{
		"[service]\nallow = [\"-h\"]",
		"[service]\nallow = [\"nginx service\"]",
		"[service]\nallow = [\"[bad\"]",
		"[logs]\njournal_units = [\"\"]",
		"[process]\nallowed_signals = [\"SIGTERM\"]",
		"[process]\nallowed_signals = [\"BOGUS\"]",
		"[system]\nmin_power_interval = \"48h\"",
		"[system]\nmin_power_interval = \"-1s\"",
	} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
	c, err := Parse([]byte("[service]\nallow = [\"nginx\", \"motion*\", \"getty@tty1.service\"]\n[process]\nallowed_signals = [\"TERM\", \"KILL\"]"))
	if err != nil {
		t.Fatal(err)
	}
	for unit, want := range map[string]bool{
		"nginx.service": true, "nginx.socket": false, "motion.service": true, "motioneye.service": true,
		"getty@tty1.service": true, "getty@tty2.service": false, "ssh.service": false,
	} {
		if got := UnitMatches(c.Service.Allow, unit); got != want {
			t.Errorf("UnitMatches(%v, %s) = %v, want %v", c.Service.Allow, unit, got, want)
		}
	}
	if d := Default(); d.Service.Control || d.Process.Signals || len(d.Service.Allow) != 0 || d.System.MinPowerInterval.D() != 10*time.Minute {
		t.Fatalf("defaults allow too much: %+v %+v", d.Service, d.Process)
	}
}

// [guard] defaults to asking when the client can, within two minutes.
func TestGuardDefaultsAndModes(t *testing.T) {
	if g := Default().Guard; g.Elicitation != ElicitPreferred || g.ElicitationTimeout.D() != 120*time.Second {
		t.Fatalf("default guard %+v", g)
	}
	c, err := Parse([]byte("[guard]\nelicitation = \"required\"\nelicitation_timeout = \"30s\"\n"))
	if err != nil || c.Guard.Elicitation != ElicitRequired || c.Guard.ElicitationTimeout.D() != 30*time.Second {
		t.Fatalf("parsed %+v, %v", c.Guard, err)
	}
}

// [http] is off by default; a listen off loopback needs TLS or an explicit
// insecure_plaintext; bad values name their key.
func TestHTTPSettings(t *testing.T) {
	if d := Default(); d.HTTP.Listen != "" || d.HTTP.TLS || d.HTTP.InsecurePlaintext {
		t.Fatalf("[http] on by default: %+v", d.HTTP)
	}
	for bad, key := range map[string]string{
		"listen = \"0.0.0.0:8765\"":                             "http.listen",
		"listen = \":8765\"":                                    "http.listen",
		"listen = \"192.168.1.20:8765\"":                        "http.listen",
		"listen = \"pi.local:8765\"":                            "http.listen",
		"listen = \"127.0.0.1\"":                                "http.listen",
		"listen = \"127.0.0.1:99999\"":                          "http.listen",
		"tls = true\ntls_cert = \"/etc/c.pem\"":                 "http.tls_cert",
		"tls_cert = \"/etc/c.pem\"\ntls_key = \"/etc/k.pem\"":   "http.tls_cert",
		"tls = true\ntls_cert = \"c.pem\"\ntls_key = \"k.pem\"": "http.tls_cert",
		"names = [\"https://pi.local\"]":                        "http.names",
		"max_body_bytes = 10":                                   "http.max_body_bytes",
		"read_header_timeout = \"0s\"":                          "http.read_header_timeout",
		"rate = 0.0":                                            "http.rate",
		"burst = 0":                                             "http.burst",
		"max_sessions = 0":                                      "http.max_sessions",
		"session_idle = \"0s\"":                                 "http.session_idle",
	} {
		_, err := Parse([]byte("[http]\n" + bad))
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%q: %v, want an error naming %s", bad, err, key)
		}
	}
	for _, good := range []string{
		"listen = \"127.0.0.1:8765\"",
		"listen = \"[::1]:8765\"",
		"listen = \"localhost:0\"",
		"listen = \"0.0.0.0:8765\"\ntls = true",
		"listen = \"192.168.1.20:8765\"\ntls = true\ntls_cert = \"/etc/c.pem\"\ntls_key = \"/etc/k.pem\"\nnames = [\"pi.local\"]",
		"listen = \"0.0.0.0:8765\"\ninsecure_plaintext = true",
	} {
		if _, err := Parse([]byte("[http]\n" + good)); err != nil {
			t.Errorf("%q: %v", good, err)
		}
	}
}

// A [guard.button] pin or LED in [gpio] pins is refused: the button's pins
// are reserved from every tool.
func TestButtonPinsOverlapRefused(t *testing.T) {
	for _, tc := range []struct{ toml, want string }{
		{"[guard.button]\npin = 26\n[gpio]\npins = [{pin = 26, name = \"b\", mode = \"input\"}]\n", "GPIO26"},
		{"[guard.button]\npin = 26\nled = 21\n[gpio]\npins = [{pin = 21, name = \"l\", mode = \"output\"}]\n", "GPIO21"},
	} {
		_, err := Parse([]byte(tc.toml))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "guard.button") || !strings.Contains(err.Error(), "overlaps") {
			t.Errorf("%q: %v", tc.toml, err)
		}
	}
	if _, err := Parse([]byte("[guard.button]\npin = 26\nled = 21\n[gpio]\npins = [{pin = 17, name = \"r\", mode = \"output\"}]\n")); err != nil {
		t.Errorf("no overlap: %v", err)
	}
	c := Laptop("/tmp/x", "alice")
	if c.Guard.Button.Pin != LaptopButtonPin || c.Guard.Button.LED != LaptopButtonLED || c.Validate() != nil {
		t.Errorf("laptop button = %+v, %v", c.Guard.Button, c.Validate())
	}
}
