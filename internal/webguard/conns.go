package webguard

import (
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// Conns caps the connections a listener keeps open: in total, and from any
// one source address. A connection costs the device a goroutine and its
// buffers for as long as the server keeps it (a silent one until the
// header timeout, an idle keep-alive until the idle timeout), so without a
// cap a client can open thousands. Over the total, the connection that has
// been idle longest (between requests) is closed to make room, since its
// client loses only a keep-alive; when none is idle, and always over the
// per-source cap, the new connection is closed at once.
//
// Give the http.Server ConnState as its ConnState, so idle connections are
// known.
type Conns struct {
	Total, PerSource int
	// Refused is told of each connection closed at accept; nil: nobody.
	Refused func(remote net.Addr, why string)
	// Now stamps when a connection went idle; nil: time.Now.
	Now func() time.Time

	mu       sync.Mutex
	open     map[net.Conn]*connInfo
	bySource map[string]int
}

type connInfo struct {
	source    string
	idleSince time.Time // zero while not idle
}

// Listen wraps ln.
func (c *Conns) Listen(ln net.Listener) net.Listener {
	return &connsListener{Listener: ln, c: c}
}

// Open is how many connections are open.
func (c *Conns) Open() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.open)
}

type connsListener struct {
	net.Listener
	c *Conns
}

func (l *connsListener) Accept() (net.Conn, error) {
	for {
		conn, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		tc, why := l.c.admit(conn)
		if tc != nil {
			return tc, nil
		}
		if l.c.Refused != nil {
			l.c.Refused(conn.RemoteAddr(), why)
		}
		conn.Close()
	}
}

// admit counts conn in, or says why not.
func (c *Conns) admit(conn net.Conn) (net.Conn, string) {
	src := conn.RemoteAddr().String()
	if h, _, err := net.SplitHostPort(src); err == nil {
		src = h
	}
	var victim net.Conn
	c.mu.Lock()
	if c.open == nil {
		c.open, c.bySource = map[net.Conn]*connInfo{}, map[string]int{}
	}
	if c.PerSource > 0 && c.bySource[src] >= c.PerSource {
		c.mu.Unlock()
		return nil, fmt.Sprintf("%d connections open from %s, the most allowed from one address (http.max_conns_per_source)", c.PerSource, src)
	}
	if c.Total > 0 && len(c.open) >= c.Total {
		for k, ci := range c.open {
			if !ci.idleSince.IsZero() && (victim == nil || ci.idleSince.Before(c.open[victim].idleSince)) {
				victim = k
			}
		}
		if victim == nil {
			c.mu.Unlock()
			return nil, fmt.Sprintf("%d connections open, none idle, the most allowed (http.max_conns)", c.Total)
		}
		c.forget(victim)
	}
	tc := &trackedConn{Conn: conn, c: c}
	c.open[tc] = &connInfo{source: src}
	c.bySource[src]++
	c.mu.Unlock()
	if victim != nil {
		victim.Close()
	}
	return tc, ""
}

// forget drops k from the counts; c.mu is held.
func (c *Conns) forget(k net.Conn) {
	ci := c.open[k]
	if ci == nil {
		return
	}
	delete(c.open, k)
	if c.bySource[ci.source]--; c.bySource[ci.source] <= 0 {
		delete(c.bySource, ci.source)
	}
}

// ConnState is for http.Server.ConnState: it learns which connections are
// idle.
func (c *Conns) ConnState(conn net.Conn, s http.ConnState) {
	// A TLS listener hands the server its own conn around ours.
	for {
		if _, ok := conn.(*trackedConn); ok {
			break
		}
		u, ok := conn.(interface{ NetConn() net.Conn })
		if !ok {
			return
		}
		conn = u.NetConn()
	}
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ci := c.open[conn]
	if ci == nil {
		return
	}
	if s == http.StateIdle {
		ci.idleSince = now()
	} else {
		ci.idleSince = time.Time{}
	}
}

type trackedConn struct {
	net.Conn
	c    *Conns
	once sync.Once
}

func (t *trackedConn) Close() error {
	t.once.Do(func() {
		t.c.mu.Lock()
		t.c.forget(t)
		t.c.mu.Unlock()
	})
	return t.Conn.Close()
}
