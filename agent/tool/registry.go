package tool

import (
	"context"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
)

// Registry holds the tools in registration order, by wire name and by id.
// The local tools are added once at start; the LAN domains' tools come and
// go while the agent serves, hence the lock.
type Registry struct {
	opt    Options
	mu     sync.RWMutex
	byName map[string]*Tool
	byID   map[string]*Tool
	order  []*Tool
	err    error // first registration error, reported by New
}

// Options are what the registry needs from the agent.
type Options struct {
	// Dotted serves the canonical dotted ids as wire names
	// ([agent] expose_dotted_names).
	Dotted bool
	// CheckOutput keeps each tool's resolved output schema, to validate
	// results against it; otherwise only its JSON.
	CheckOutput bool
	// Stability is the stability of a tool whose Spec names none; nil: "".
	Stability func(id string) string
}

// NewRegistry is an empty registry.
func NewRegistry(o Options) *Registry {
	return &Registry{opt: o, byName: map[string]*Tool{}, byID: map[string]*Tool{}}
}

// Err is the first registration error: a bad name, schema or collision.
func (r *Registry) Err() error { return r.err }

// Lookup finds a tool by wire name or canonical id.
func (r *Registry) Lookup(name string) (*Tool, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if t, ok := r.byName[name]; ok {
		return t, true
	}
	t, ok := r.byID[name]
	return t, ok
}

// Get finds a tool by canonical id only.
func (r *Registry) Get(id string) (*Tool, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.byID[id]
	return t, ok
}

// All is every tool now, in registration order.
func (r *Registry) All() []*Tool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Clone(r.order)
}

// Mount adds t unless its wire name or id is taken.
func (r *Registry) Mount(t *Tool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.byName[t.name]; dup {
		return fmt.Errorf("tool: name %q collides", t.name)
	}
	if _, dup := r.byID[t.id]; dup {
		return fmt.Errorf("tool: id %q registered twice", t.id)
	}
	r.byName[t.name], r.byID[t.id] = t, t
	r.order = append(r.order, t)
	return nil
}

// Unmount drops the tools whose ids satisfy drop and returns them.
func (r *Registry) Unmount(drop func(*Tool) bool) []*Tool {
	r.mu.Lock()
	defer r.mu.Unlock()
	var gone []*Tool
	r.order = slices.DeleteFunc(r.order, func(t *Tool) bool {
		if drop(t) {
			gone = append(gone, t)
			delete(r.byName, t.name)
			delete(r.byID, t.id)
			return true
		}
		return false
	})
	return gone
}

// Run runs t's handler. A panic in it is a bug of that one tool: it becomes
// the call's internal error, answered and audited like any other, with the
// stack in the agent log. go-sdk runs handlers without a recover, so
// otherwise one bad input to one tool would end the agent and every session
// on it, and a model could do that at will.
func (t *Tool) Run(ctx context.Context, c *Call, args []byte) (out any, summary string, err error) {
	defer func() {
		if p := recover(); p != nil {
			out, summary, err = nil, "", fmt.Errorf("tool %s panicked: %v\n%s", t.id, p, debug.Stack())
		}
	}()
	return t.run(ctx, c, args)
}
