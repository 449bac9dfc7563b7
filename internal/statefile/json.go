package statefile

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// JSON is a state file that holds one JSON value of type T. The simulated
// board's systemd, process table and package manager each keep one; they
// differ only in T, in what a decoded value must satisfy, and in layout.
type JSON[T any] struct {
	File
	// Check validates a decoded value and fills in what an older file
	// lacks; nil: any value that decodes is good.
	Check func(*T) error
	// Encode is the file's layout; nil: indented JSON and a newline.
	Encode func(*T) ([]byte, error)
}

// Open makes sure the file holds a good T: seed's value when the file is
// missing or empty, else the file as it is, checked (a file that no longer
// decodes is reported, never overwritten). A process that may not write
// the file (the agent, when the helper owns it) only checks that it can
// read it, and readOnly says so: its changes will fail.
func (j JSON[T]) Open(seed func() *T) (readOnly bool, err error) {
	readOnly, err = j.File.Create(func(f *os.File) error {
		info, err := f.Stat()
		if err != nil {
			return fmt.Errorf("%s: %w", j.What, err)
		}
		if info.Size() == 0 {
			return j.write(f, seed())
		}
		_, err = j.decode(f)
		return err
	})
	if readOnly {
		return true, j.Read(func(*T) error { return nil })
	}
	return false, err
}

// Read runs fn on the file's value under a shared lock.
func (j JSON[T]) Read(fn func(*T) error) error {
	return j.File.View(func(f *os.File) error {
		v, err := j.decode(f)
		if err != nil {
			return err
		}
		return fn(v)
	})
}

// Change runs fn on the file's value under an exclusive lock and writes the
// value back if fn returns nil; fn's error is returned as it came.
func (j JSON[T]) Change(fn func(*T) error) error {
	return j.File.Update(func(f *os.File) error {
		v, err := j.decode(f)
		if err != nil {
			return err
		}
		if err := fn(v); err != nil {
			return err
		}
		return j.write(f, v)
	})
}

func (j JSON[T]) decode(f *os.File) (*T, error) {
	body, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("%s: read %s: %w", j.What, j.Path, err)
	}
	v := new(T)
	if err := json.Unmarshal(body, v); err != nil {
		return nil, fmt.Errorf("%s: %s is not a state file of this board (remove it to start from the seeded board): %w", j.What, j.Path, err)
	}
	if j.Check != nil {
		if err := j.Check(v); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", j.What, j.Path, err)
		}
	}
	return v, nil
}

// write replaces the file's content in place: the lock is on this inode,
// so the file must never be replaced by a rename.
func (j JSON[T]) write(f *os.File, v *T) error {
	var body []byte
	var err error
	if j.Encode != nil {
		body, err = j.Encode(v)
	} else if body, err = json.MarshalIndent(v, "", "  "); err == nil {
		body = append(body, '\n')
	}
	if err != nil {
		return fmt.Errorf("%s: encode: %w", j.What, err)
	}
	if _, err := f.WriteAt(body, 0); err != nil {
		return fmt.Errorf("%s: write %s: %w", j.What, j.Path, err)
	}
	if err := f.Truncate(int64(len(body))); err != nil {
		return fmt.Errorf("%s: write %s: %w", j.What, j.Path, err)
	}
	return nil
}
