// Package scrape carries one Prometheus scrape's values from the agent to
// whatever writes them in an exposition format, without linking that
// writer. The agent reads its values into a Snapshot (metric families and
// plain points); a Renderer turns the snapshot into the page a scraper
// gets. The renderer that uses Prometheus's client library (internal/promexp)
// runs in its own small process, raspi-mcp-exporter, which Process starts
// and talks to over a pipe: the library and the protobuf runtime it brings
// cost the agent's binary about 3.7 MB and its idle memory about 3 MiB,
// which only owners who scrape should pay. This package is the standard
// library only, so the agent stays free of them.
package scrape

import (
	"context"
	"errors"
)

// ValueType is what a family's values are, as the exposition formats say.
type ValueType uint8

const (
	Gauge   ValueType = 1 // a value that goes up and down
	Counter ValueType = 2 // a cumulative count; its name ends in _total
)

// Family is one metric family: its name, help text, type and the names of
// its labels.
type Family struct {
	Name   string
	Type   ValueType
	Help   string
	Labels []string
}

// Point is one sample: the index of its family in Snapshot.Families, its
// value, and one label value for each of the family's label names.
type Point struct {
	Family int
	Value  float64
	Labels []string
}

// Snapshot is what one scrape found.
type Snapshot struct {
	// Families is the exporter's table; an exporter passes the same one
	// on every scrape (Process sends it to its child only when it changes).
	Families []Family
	Points   []Point
	// ProcessPID, when not 0, asks for the client library's process
	// metrics (CPU time, resident memory, open files, ...) of that
	// process, named with the prefix ProcessNamespace. The agent names
	// itself here, since the renderer may be another process.
	ProcessPID       int
	ProcessNamespace string
}

// Page is a rendered scrape.
type Page struct {
	ContentType string
	Body        []byte // not compressed; the HTTP side compresses
	// Problems are the samples left out (a label value that is not
	// UTF-8, a sample repeated), one line each; the rest is in Body.
	Problems []string
}

// Renderer writes a snapshot in the format accept (an HTTP Accept header,
// "" for none) asks for. An error means there is no page at all.
type Renderer interface {
	Render(ctx context.Context, accept string, s *Snapshot) (Page, error)
}

// Unavailable is the Renderer of an agent that has none: every scrape
// fails with its text (that the exporter binary is not installed, say).
type Unavailable string

func (u Unavailable) Render(context.Context, string, *Snapshot) (Page, error) {
	return Page{}, errors.New(string(u))
}

// SameFamilies reports whether a and b are the same table.
func SameFamilies(a, b []Family) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := &a[i], &b[i]
		if x.Name != y.Name || x.Type != y.Type || x.Help != y.Help || len(x.Labels) != len(y.Labels) {
			return false
		}
		for j := range x.Labels {
			if x.Labels[j] != y.Labels[j] {
				return false
			}
		}
	}
	return true
}
