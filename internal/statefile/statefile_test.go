package statefile

import (
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Updates from separate File values (separate open file descriptions, as
// separate processes have) exclude each other: no increment is lost.
func TestUpdatesExcludeEachOther(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n")
	seed := func(f *os.File) error { _, err := f.WriteString("0"); return err }
	if ro, err := (File{path, "test"}).Create(seed); ro || err != nil {
		t.Fatalf("create: read-only %v, %v", ro, err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 25; j++ {
				err := File{path, "test"}.Update(func(f *os.File) error {
					b, err := io.ReadAll(f)
					if err != nil {
						return err
					}
					n, err := strconv.Atoi(string(b))
					if err != nil {
						return err
					}
					if err := f.Truncate(0); err != nil {
						return err
					}
					_, err = f.WriteAt([]byte(strconv.Itoa(n+1)), 0)
					return err
				})
				if err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	var got string
	if err := (File{path, "test"}).View(func(f *os.File) error {
		b, err := io.ReadAll(f)
		got = string(b)
		return err
	}); err != nil || got != "200" {
		t.Fatalf("after 200 updates: %q, %v", got, err)
	}
}

func TestErrorsNameTheFile(t *testing.T) {
	missing := File{filepath.Join(t.TempDir(), "no", "such"), "units: sim"}
	if _, err := missing.Create(func(*os.File) error { return nil }); err == nil || !strings.HasPrefix(err.Error(), "units: sim: open ") {
		t.Fatalf("create in a missing directory: %v", err)
	}
	if err := missing.View(func(*os.File) error { return nil }); err == nil || !strings.HasPrefix(err.Error(), "units: sim: ") {
		t.Fatalf("view of a missing file: %v", err)
	}
}
