// Package promexp writes a scrape.Snapshot in Prometheus's exposition
// formats with Prometheus's own client library, client_golang: the text
// format 0.0.4, or OpenMetrics for a scraper that asks for it, negotiated,
// checked and encoded by the library as its HTTP handler would (promhttp
// with ContinueOnError and OpenMetrics enabled). The project keeps to a
// maintained library for exposition formats rather than a writer of its own.
//
// It links client_golang, client_model, expfmt and the protobuf runtime,
// so only raspi-mcp-exporter (and tests) import it, never the agent.
package promexp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/expfmt"

	"github.com/raspi-mcp/raspi-mcp/internal/scrape"
)

// Renderer is a scrape.Renderer that renders in this process. It keeps a
// registry built for the last family table and process it was given and
// builds a new one only when they change; one render runs at a time.
type Renderer struct {
	mu   sync.Mutex
	reg  *prometheus.Registry
	coll *collector
	pid  int
	ns   string
	body bytes.Buffer
}

// New returns a Renderer with no registry yet; the first Render builds it.
func New() *Renderer { return &Renderer{} }

// Render gathers s through the registry and encodes it in the format
// accept asks for. A sample the library refuses (a label value that is not
// UTF-8, a repeated sample, a wrong label count) is left out and named in
// the page's Problems; only a scrape with nothing left at all is an error.
func (r *Renderer) Render(_ context.Context, accept string, s *scrape.Snapshot) (scrape.Page, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reg == nil || !scrape.SameFamilies(r.coll.fams, s.Families) || r.pid != s.ProcessPID || r.ns != s.ProcessNamespace {
		if err := r.build(s); err != nil {
			return scrape.Page{}, err
		}
	}
	r.coll.points = s.Points
	mfs, err := r.reg.Gather()
	r.coll.points = nil
	var problems []string
	if err != nil {
		if len(mfs) == 0 {
			return scrape.Page{}, fmt.Errorf("promexp: gathering: %w", err)
		}
		var multi prometheus.MultiError
		if errors.As(err, &multi) {
			for _, e := range multi {
				problems = append(problems, "error gathering metrics: "+e.Error())
			}
		} else {
			problems = append(problems, "error gathering metrics: "+err.Error())
		}
	}
	h := http.Header{}
	if accept != "" {
		h.Set("Accept", accept)
	}
	format := expfmt.NegotiateIncludingOpenMetrics(h)
	r.body.Reset()
	enc := expfmt.NewEncoder(&r.body, format)
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			problems = append(problems, "error encoding metric family: "+err.Error())
		}
	}
	if c, ok := enc.(expfmt.Closer); ok {
		// OpenMetrics' closing "# EOF" line.
		if err := c.Close(); err != nil {
			problems = append(problems, "error closing the page: "+err.Error())
		}
	}
	return scrape.Page{ContentType: string(format), Body: bytes.Clone(r.body.Bytes()), Problems: problems}, nil
}

// build makes the registry for s's family table and process.
func (r *Renderer) build(s *scrape.Snapshot) error {
	c := &collector{fams: s.Families, descs: make([]*prometheus.Desc, len(s.Families)), types: make([]prometheus.ValueType, len(s.Families))}
	for i, f := range s.Families {
		switch f.Type {
		case scrape.Gauge:
			c.types[i] = prometheus.GaugeValue
		case scrape.Counter:
			c.types[i] = prometheus.CounterValue
		default:
			return fmt.Errorf("promexp: family %q has type %d, neither gauge nor counter", f.Name, f.Type)
		}
		c.descs[i] = prometheus.NewDesc(f.Name, f.Help, f.Labels, nil)
	}
	reg := prometheus.NewRegistry()
	if err := reg.Register(c); err != nil {
		return fmt.Errorf("promexp: the family table: %w", err)
	}
	if s.ProcessPID != 0 {
		pid := s.ProcessPID
		proc := collectors.NewProcessCollector(collectors.ProcessCollectorOpts{
			PidFn:     func() (int, error) { return pid, nil },
			Namespace: s.ProcessNamespace,
		})
		if err := reg.Register(proc); err != nil {
			return fmt.Errorf("promexp: process metrics under %q: %w", s.ProcessNamespace, err)
		}
	}
	r.reg, r.coll, r.pid, r.ns = reg, c, s.ProcessPID, s.ProcessNamespace
	return nil
}

// collector sends the points of the scrape being rendered as const metrics.
type collector struct {
	fams   []scrape.Family
	descs  []*prometheus.Desc
	types  []prometheus.ValueType
	points []scrape.Point // set for the length of one Gather
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect sends every point. A label value the library refuses becomes an
// invalid metric, which Gather reports and leaves out, rather than a panic.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	for _, p := range c.points {
		if p.Family < 0 || p.Family >= len(c.descs) {
			err := fmt.Errorf("promexp: a point of family %d, the table has %d", p.Family, len(c.descs))
			ch <- prometheus.NewInvalidMetric(prometheus.NewInvalidDesc(err), err)
			continue
		}
		d := c.descs[p.Family]
		m, err := prometheus.NewConstMetric(d, c.types[p.Family], p.Value, p.Labels...)
		if err != nil {
			m = prometheus.NewInvalidMetric(d, err)
		}
		ch <- m
	}
}
