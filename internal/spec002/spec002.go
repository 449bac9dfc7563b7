// Package spec002 is what the contract tests know about spec 002, the tool
// catalog this server implements (a document kept outside the repository):
// its schemas and example requests as internal/spec002gen extracted them into
// agent/testdata/spec002, and the one table of deliberate differences from
// it. The agent's contract test compares every tool with the spec; the e2e
// test replays the examples through `raspi-mcp stdio`.
//
// Comments across the repository point into the catalog as "spec 002 §N" and
// "spec 002 addendum §N", always beside their own account of what the section
// says. The main part (§2 to §9) names the namespaces and tools (§2.2), gives
// full JSON-RPC examples (§2.6), one section per namespace with its parameter
// and result schemas (§3 system to §8 manage), the error codes (§9.1) and the
// stability levels (§9.2). The addendum, numbered from §1 again, details
// the network info tools (§1), the service and process schemas (§2),
// versioning (§3), network and disk rates in the health snapshot (§4),
// process filters and pages (§5) and service dependency checks (§6).
package spec002

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// Difference is one deliberate difference from spec 002. Tool is the
// spec's dotted id or "*" for every tool; Path names the parameter, result
// field or example; Kind is what differs there (nullable, maximum, type,
// served-as, ...), so a row excuses that and nothing else at its path.
// Retry, for an example, is what to add to its arguments to make it
// succeed, proving that the difference is only that.
type Difference struct {
	Tool, Path, Kind, Reason string
	Retry                    map[string]any
}

const (
	whyNullable   = "nullable in the spec (\"type\": [T, \"null\"]): the advertised schema keeps the single type T, which every client's schema dialect accepts (Gemini's OpenAPI subset rejects type unions, and the Inspector's --strict with it); an explicit null is still accepted and means \"not given\" (dropNulls)"
	whyOmitted    = "nullable result field: omitted when there is no value rather than sent as null, so the output schema keeps a single type"
	whyGuards     = "a high-risk tool takes confirm and reason (the guard contract every mutating tool follows); with them the example succeeds"
	whyNoProgress = "the self-update's progress is not measured: apt runs in the updater's own unit while both daemons restart, so no agent could report a percentage; status running, then succeeded or failed, is what is known"
)

// Differences is the one table of deliberate differences from spec 002.
// The contract test fails on a difference not listed here, and on a row
// that no longer matches one.
var Differences = []Difference{
	// Spelling of nullable fields.
	{"metrics.get_samples", "job_id", "nullable", whyNullable, nil},
	{"metrics.get_samples", "since", "nullable", whyNullable, nil},
	{"metrics.get_samples", "until", "nullable", whyNullable, nil},
	{"metrics.get_samples", "limit", "nullable", whyNullable, nil},
	{"gpio.write_pin", "duration_ms", "nullable", whyNullable, nil},
	{"i2c.write", "register", "nullable", whyNullable, nil},
	{"gpio.list_pins", "result.pins[].value", "nullable", whyOmitted, nil},
	{"i2c.read", "result.register", "nullable", whyOmitted, nil},
	{"metrics.get_samples", "result.samples[].cpu_temperature_celsius", "nullable", whyOmitted + "; absent without a sensor", nil},
	{"i2c.list_buses", "result.buses[].description", "nullable", whyOmitted, nil},
	{"camera.take_photo", "result.public_url", "nullable", whyOmitted + "; it is set only when [camera] public_url is configured", nil},
	{"manage.get_server_status", "result.build", "nullable", whyOmitted, nil},
	{"manage.get_server_status", "result.last_update.started_at", "nullable", whyOmitted, nil},
	{"manage.get_server_status", "result.last_update.finished_at", "nullable", whyOmitted + "; absent while the update runs", nil},
	{"manage.get_server_status", "result.last_update.message", "nullable", whyOmitted, nil},
	{"manage.get_server_status", "result.last_update.progress_percent", "missing", whyNoProgress, nil},
	{"manage.update_server", "channel", "nullable", whyNullable, nil},
	{"manage.update_server", "target_version", "nullable", whyNullable, nil},
	{"manage.update_server", "target_version", "length", "length bounds added: a Debian version is short; a longer one cannot exist", nil},
	{"manage.update_server", "result.old_version", "nullable", whyOmitted, nil},
	{"manage.update_server", "result.new_version", "nullable", whyOmitted, nil},
	{"manage.update_server", "result.status.started_at", "nullable", whyOmitted, nil},
	{"manage.update_server", "result.status.finished_at", "nullable", whyOmitted + "; the call returns while the update runs", nil},
	{"manage.update_server", "result.status.message", "nullable", whyOmitted, nil},
	{"manage.update_server", "result.status.progress_percent", "missing", whyNoProgress, nil},
	// Results carry more than the spec lists.
	{"*", "result: additional fields", "additional", "the spec's result schemas say additionalProperties false, yet its compatibility rules (§2.4.6, addendum §3.2) make adding result fields a non-breaking change: results add fields such as dry_run, plans and units of context, and clients must ignore what they do not know", nil},
	// Bounds the spec leaves open.
	{"gpio.configure_pin", "pin", "maximum", "maximum added: the highest GPIO line of the SoC; a larger pin cannot exist", nil},
	{"gpio.write_pin", "pin", "maximum", "maximum added: the highest GPIO line of the SoC; a larger pin cannot exist", nil},
	{"gpio.set_pwm", "pin", "maximum", "maximum added: the highest GPIO line of the SoC; a larger pin cannot exist", nil},
	{"i2c.scan_bus", "bus", "maximum", "maximum added: Linux numbers I2C adapters below 256", nil},
	{"i2c.read", "bus", "maximum", "maximum added: Linux numbers I2C adapters below 256", nil},
	{"i2c.write", "bus", "maximum", "maximum added: Linux numbers I2C adapters below 256", nil},
	{"metrics.stop_sampling_job", "job_id", "length", "length bounds added: job ids are short; a longer one cannot exist", nil},
	{"metrics.get_samples", "job_id", "length", "length bound added: job ids are short; a longer one cannot exist", nil},
	{"system.get_detailed_network_info", "connection_state_filter", "maxItems", "maxItems added: there are only four states to filter on", nil},
	// Renamed or unserved tools of the examples.
	{"service.start", "", "served-as", "the example's service.start is service_control_service with action start (the catalog's own tool for it)", nil},
	{"manage.get_capabilities", "", "served-as", "the addendum's manage.get_capabilities is system_get_capabilities, as the main catalog names it; it answers tool_namespaces and capabilities as the addendum shows", nil},
	{"service.start", "example: Request (start a service)", "example", whyGuards, map[string]any{"confirm": true, "reason": "contract test"}},
	{"service.control_service", "example: Force override (admin only)", "example", whyGuards, map[string]any{"confirm": true, "reason": "contract test"}},
	{"service.validate_unit_file", "example: Before enabling a service, validate its unit file", "example", "the example's my-custom.service is not installed on the simulated board, so the answer is not_found; the same call for an installed unit succeeds", map[string]any{"service_name": "nginx.service"}},
}

// Rename is where a spec id is served under another tool, with the
// arguments the call needs there.
type Rename struct {
	ID   string
	Args map[string]any
}

// Renamed maps the spec's ids onto ours where they differ (see Differences).
var Renamed = map[string]Rename{
	"service.start":           {ID: "service.control_service", Args: map[string]any{"action": "start"}},
	"manage.get_capabilities": {ID: "system.get_capabilities"},
}

// Tool is everything the spec says about one tool.
type Tool struct {
	ID              string           `json:"id"`
	Sections        []string         `json:"sections"`
	Parameters      map[string]any   `json:"parameters"`
	Result          map[string]any   `json:"result"`
	ResultAdditions []map[string]any `json:"result_additions"`
	Examples        []Example        `json:"examples"`
}

// Example is one of the spec's example requests.
type Example struct {
	Section     string         `json:"section"`
	Label       string         `json:"label"`
	Params      map[string]any `json:"params"`
	ExpectError bool           `json:"expect_error"`
}

// Load reads the extracted spec: the tools by spec id, and the shared
// definitions by name.
func Load(dir string) (map[string]*Tool, map[string]map[string]any, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, nil, err
	}
	if len(files) < 20 {
		return nil, nil, fmt.Errorf("spec002: only %d files in %s; regenerate with go generate ./agent", len(files), dir)
	}
	tools := map[string]*Tool{}
	var defs map[string]map[string]any
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, nil, err
		}
		if filepath.Base(f) == "definitions.json" {
			err = json.Unmarshal(b, &defs)
		} else {
			var t Tool
			err = json.Unmarshal(b, &t)
			tools[t.ID] = &t
		}
		if err != nil {
			return nil, nil, fmt.Errorf("spec002: %s: %w", f, err)
		}
	}
	return tools, defs, nil
}

// Find is the row of Differences for a difference, if any.
func Find(tool, path, kind string) (Difference, bool) {
	for _, d := range Differences {
		if (d.Tool == tool || d.Tool == "*") && d.Path == path && d.Kind == kind {
			return d, true
		}
	}
	return Difference{}, false
}

// Call is how to make an example's call here: the tool's id and its
// arguments, with what a rename needs.
func Call(specID string, ex Example) (string, map[string]any) {
	args := map[string]any{}
	for k, v := range ex.Params {
		args[k] = v
	}
	id := specID
	if r, ok := Renamed[specID]; ok {
		id = r.ID
		for k, v := range r.Args {
			args[k] = v
		}
	}
	return id, args
}
