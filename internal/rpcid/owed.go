package rpcid

import (
	"maps"
	"slices"
	"sync"
)

// Owed is the set of requests handed to the go-sdk server and not yet
// answered, by Key. go-sdk v1.8.0 drops the answers still in flight when its
// input reaches EOF (go-sdk issue #1061), so whoever stands before it on the
// input side, the agent's line filter or the stdio bridge, holds the EOF back
// until Owed drains. Its methods may be called from several goroutines.
type Owed struct {
	mu      sync.Mutex
	ids     map[string]struct{}
	drained chan struct{} // signalled when ids becomes empty
	msgs    []Message     // Answered's scan buffer, used under mu
}

// NewOwed returns an empty set.
func NewOwed() *Owed {
	return &Owed{ids: map[string]struct{}{}, drained: make(chan struct{}, 1)}
}

// Add records a request's id as owed an answer.
func (o *Owed) Add(id []byte) {
	o.mu.Lock()
	o.ids[Key(id)] = struct{}{}
	o.mu.Unlock()
}

// Answered strikes off the responses (an id, no method) of one line from
// the server. A line that is not a message strikes nothing.
func (o *Owed) Answered(line []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.ids) == 0 {
		return // nothing to strike: the scan is not needed
	}
	msgs, _, ok := Scan(line, o.msgs)
	o.msgs = msgs
	if !ok {
		return
	}
	for _, m := range msgs {
		if m.Method || m.ID == nil {
			continue
		}
		delete(o.ids, Key(m.ID))
	}
	if len(o.ids) == 0 {
		select {
		case o.drained <- struct{}{}:
		default:
		}
	}
}

// Count is how many answers are owed.
func (o *Owed) Count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.ids)
}

// Drained is signalled when the last owed answer is struck off.
func (o *Owed) Drained() <-chan struct{} { return o.drained }

// Keys lists the owed ids' keys, sorted.
func (o *Owed) Keys() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Sorted(maps.Keys(o.ids))
}
