package webguard

import (
	"net/http"
	"time"
)

// WriteDeadline gives every write and flush of w a deadline of d from its
// start, so a client that stops reading fails the handler's write after d
// instead of holding it, and all it has yet to send, for as long as the
// connection lives. Between writes no deadline is armed: a stream may idle.
// Done arms one more, for what the server writes after the handler returns.
type WriteDeadline struct {
	http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
}

// NewWriteDeadline wraps w.
func NewWriteDeadline(w http.ResponseWriter, d time.Duration) *WriteDeadline {
	return &WriteDeadline{ResponseWriter: w, rc: http.NewResponseController(w), d: d}
}

func (w *WriteDeadline) arm()    { _ = w.rc.SetWriteDeadline(time.Now().Add(w.d)) }
func (w *WriteDeadline) disarm() { _ = w.rc.SetWriteDeadline(time.Time{}) }

func (w *WriteDeadline) Write(p []byte) (int, error) {
	w.arm()
	n, err := w.ResponseWriter.Write(p)
	if err == nil {
		w.disarm()
	}
	return n, err
}

// FlushError is what http.ResponseController.Flush calls.
func (w *WriteDeadline) FlushError() error {
	w.arm()
	err := w.rc.Flush()
	if err == nil {
		w.disarm()
	}
	return err
}

// Flush is http.Flusher's.
func (w *WriteDeadline) Flush() { _ = w.FlushError() }

// Unwrap is for http.ResponseController.
func (w *WriteDeadline) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Done arms the deadline for the server's last writes.
func (w *WriteDeadline) Done() { w.arm() }
