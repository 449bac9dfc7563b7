package proto

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// ErrMalformed is wrapped by every error ReadFrame and Decode return for bad
// content (as opposed to I/O failure): an oversize or empty frame, invalid
// JSON, an unknown field, a wrong type or trailing data. The helper answers a
// malformed frame with CodeInvalidArgument and closes the connection, since
// after a bad length the stream cannot be resynchronised.
var ErrMalformed = errors.New("proto: malformed message")

// headerLen is the size of the big-endian length prefix of a frame.
const headerLen = 4

// WriteFrame marshals v as JSON and writes it as one frame: a 4-byte
// big-endian length followed by the JSON body. Header and body go out in a
// single Write so a frame is never interleaved on a shared stream.
func WriteFrame(w io.Writer, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("proto: encode frame: %w", err)
	}
	if len(body) > MaxMessage {
		return fmt.Errorf("proto: frame of %d bytes exceeds the %d-byte limit", len(body), MaxMessage)
	}
	buf := make([]byte, headerLen+len(body))
	binary.BigEndian.PutUint32(buf, uint32(len(body)))
	copy(buf[headerLen:], body)
	if _, err := w.Write(buf); err != nil {
		return fmt.Errorf("proto: write frame: %w", err)
	}
	return nil
}

// ReadFrame reads one frame from r and decodes it strictly into v.
//
// The length is checked against MaxMessage before the body is allocated or
// read. A clean end of stream before the first header byte returns io.EOF
// unwrapped, so callers can tell a closed connection from a broken one; a
// frame cut short returns an error wrapping io.ErrUnexpectedEOF. Content
// errors wrap ErrMalformed.
func ReadFrame(r io.Reader, v any) error {
	var hdr [headerLen]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if err == io.EOF {
			return io.EOF
		}
		return fmt.Errorf("proto: read frame header: %w", err)
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > MaxMessage {
		return fmt.Errorf("%w: frame of %d bytes exceeds the %d-byte limit", ErrMalformed, n, MaxMessage)
	}
	if n == 0 {
		return fmt.Errorf("%w: empty frame", ErrMalformed)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("proto: read frame body of %d bytes: %w", n, err)
	}
	return Decode(body, v)
}

// Decode is the strict JSON decoder used for frames and for params: unknown
// fields, a second value or any other trailing data are errors wrapping
// ErrMalformed. (encoding/json still matches field names case-insensitively;
// that is harmless here because every field is then validated.)
func Decode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	// Anything but end of input after the value is trailing data, whether it
	// is a second value or garbage.
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: trailing data after JSON value at offset %d", ErrMalformed, dec.InputOffset())
	}
	return nil
}

// CodeOf returns the Code of the *Error in err's chain, or "" if there is none.
func CodeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}
