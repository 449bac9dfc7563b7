package agent

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/agent/series"
	"github.com/raspi-mcp/raspi-mcp/agent/store"
	"github.com/raspi-mcp/raspi-mcp/config"
)

// maxCompletions is the protocol's cap on values in one answer.
const maxCompletions = 100

// complete answers completion/complete for the arguments of our prompts
// and the variables of our resource templates. Every value comes from this
// device's allowlists or state: a pin not in [[gpio.pins]] or a unit
// outside [service] allow is never offered, so completion cannot lead a
// model to something it may not touch.
func (a *Agent) complete(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	ref, arg := req.Params.Ref, req.Params.Argument
	var values []string
	switch {
	case ref.Type == "ref/prompt" && ref.Name == "triage_failed_unit" && arg.Name == "unit",
		ref.Type == "ref/resource" && ref.URI == tmplService && arg.Name == "unit":
		values = a.allowedUnits(ctx, a.conf().Service.Allow)
	case ref.Type == "ref/resource" && ref.URI == tmplJournal && arg.Name == "unit":
		values = a.allowedUnits(ctx, a.conf().Logs.JournalUnits)
	case ref.Type == "ref/resource" && ref.URI == tmplJournal && arg.Name == "lines":
		values = []string{"20", "50", "200", "500"}
	case ref.Type == "ref/prompt" && ref.Name == "safe_gpio_change" && arg.Name == "pin":
		for _, p := range a.conf().GPIO.Pins {
			values = append(values, strconv.Itoa(p.Pin))
			if p.Name != "" {
				values = append(values, p.Name)
			}
		}
	case ref.Type == "ref/resource" && ref.URI == tmplMetric && arg.Name == "metric":
		values = a.metricNames()
	case ref.Type == "ref/resource" && ref.URI == tmplMetric && arg.Name == "window",
		ref.Type == "ref/prompt" && ref.Name == "diagnose_throttling" && arg.Name == "window":
		values = []string{"15m", "1h", "6h", "24h", "168h"}
	case ref.Type == "ref/resource" && ref.URI == tmplMetric && arg.Name == "resolution":
		values = []string{"10s", "1m", "5m", "1h", "1d"}
	default:
		values = a.completeByName(arg.Name)
	}
	return completion(values, arg.Value), nil
}

// completeByName covers arguments that mean the same wherever they appear
// (an upstream's prompt, a future template): sensors, upstreams, job ids.
func (a *Agent) completeByName(name string) []string {
	var values []string
	switch name {
	case "sensor", "sensor_name":
		for _, s := range a.conf().I2C.Sensors {
			values = append(values, s.Name)
		}
	case "upstream", "prefix":
		for _, u := range a.conf().Upstreams {
			values = append(values, u.Name)
		}
	case "job_id", "job":
		if jobs, err := a.jobQueue().list(); err == nil {
			for _, j := range jobs.Jobs {
				values = append(values, j.JobID)
			}
		}
	case "metric", "metric_name":
		values = a.metricNames()
	}
	return values
}

// allowedUnits is the unit names a list of globs admits: the literal
// entries, and the units systemd has that a glob matches.
func (a *Agent) allowedUnits(ctx context.Context, globs []string) []string {
	var out []string
	for _, g := range globs {
		if !strings.ContainsAny(g, "*?[") {
			if n, err := unitName(g); err == nil {
				out = append(out, n)
			}
		}
	}
	if a.units != nil {
		if us, err := a.units.List(ctx); err == nil {
			for _, u := range us {
				if config.UnitMatches(globs, u.Name) {
					out = append(out, u.Name)
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// metricNames is every metric the latest sample offers (devices included).
func (a *Agent) metricNames() []string {
	var latest []store.Sample
	jobs, err := a.sampler.Jobs()
	if err == nil && len(jobs) > 0 && !jobs[0].Last.IsZero() {
		j := jobs[0]
		_ = a.sampler.Scan(j.ID, j.Last, j.Last.Add(time.Second), func(s store.Sample) bool {
			latest = []store.Sample{s}
			return true
		})
	}
	names := series.Names(latest)
	slices.Sort(names)
	return names
}

// completion keeps the values that start with what was typed (any case).
func completion(values []string, typed string) *mcp.CompleteResult {
	typed = strings.ToLower(typed)
	out := []string{}
	for _, v := range values {
		if strings.HasPrefix(strings.ToLower(v), typed) {
			out = append(out, v)
		}
	}
	res := &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: out, Total: len(out)}}
	if len(out) > maxCompletions {
		res.Completion.Values, res.Completion.HasMore = out[:maxCompletions], true
	}
	return res
}
