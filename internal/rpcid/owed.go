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
//
// An open-ended request (Message.OpenEnded: subscriptions/listen) is owed
// too, and counts among the requests in flight (Count), but the end of the
// input does not wait for it (Awaited): it is answered only once the client
// cancels it or leaves, so a client that closes its input with a listen open
// would otherwise hold its session for the whole grace, and go-sdk cancels
// it when it sees the EOF anyway.
type Owed struct {
	mu       sync.Mutex
	ids      map[string]bool // true: open-ended
	openEnds int             // how many of ids are open-ended
	drained  chan struct{}   // signalled when no awaited id is left
	msgs     []Message       // Answered's scan buffer, used under mu
}

// NewOwed returns an empty set.
func NewOwed() *Owed {
	return &Owed{ids: map[string]bool{}, drained: make(chan struct{}, 1)}
}

// Add records a request's id as owed an answer.
func (o *Owed) Add(id []byte) { o.add(id, false) }

// AddOpenEnded records an open-ended request's id as owed an answer that
// the end of the input does not wait for.
func (o *Owed) AddOpenEnded(id []byte) { o.add(id, true) }

func (o *Owed) add(id []byte, openEnded bool) {
	k := Key(id)
	o.mu.Lock()
	if prev, ok := o.ids[k]; ok && prev {
		o.openEnds--
	}
	o.ids[k] = openEnded
	if openEnded {
		o.openEnds++
	}
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
	struck := false
	for _, m := range msgs {
		if m.Method || m.ID == nil {
			continue
		}
		k := Key(m.ID)
		openEnded, ok := o.ids[k]
		if !ok {
			continue
		}
		delete(o.ids, k)
		if openEnded {
			o.openEnds--
		}
		struck = true
	}
	if struck && len(o.ids) == o.openEnds {
		select {
		case o.drained <- struct{}{}:
		default:
		}
	}
}

// Count is how many answers are owed, open-ended requests included: the
// requests in flight.
func (o *Owed) Count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.ids)
}

// Awaited is how many answers are owed that the end of the input waits
// for: Count less the open-ended requests.
func (o *Owed) Awaited() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.ids) - o.openEnds
}

// Drained is signalled when the last awaited answer is struck off.
func (o *Owed) Drained() <-chan struct{} { return o.drained }

// Keys lists the owed ids' keys, sorted.
func (o *Owed) Keys() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Sorted(maps.Keys(o.ids))
}
