package selfupdate

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync"
)

// Sim is laptop mode's package manager for raspi-mcp itself: an installed
// version string and a repository with a newer release in stable, a newer
// one still in beta and an older one, kept in a file so it outlives the
// helper child. Installing swaps the string; nothing of this machine is
// touched.
type Sim struct {
	mu   sync.Mutex
	path string   // "" keeps the state in memory only
	mem  simState // the state when path is ""
}

type simState struct {
	Installed string      `json:"installed"`
	Offered   []Candidate `json:"offered"`
}

// simSeed is the simulated repository a new Sim starts with.
func simSeed() simState {
	return simState{Installed: "1.0.0", Offered: []Candidate{
		{Version: "0.9.0", Channel: "stable", Size: 8_912_345},
		{Version: "1.0.0", Channel: "stable", Size: 9_034_112},
		{Version: "1.1.0", Channel: "stable", Size: 9_101_876},
		{Version: "1.2.0~beta1", Channel: "beta", Size: 9_240_001},
	}}
}

// NewSim opens the simulated package state at path, seeding it when the
// file does not exist; "" keeps it in memory.
func NewSim(path string) (*Sim, error) {
	s := &Sim{path: path, mem: simSeed()}
	if path == "" {
		return s, nil
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		if err := writeJSON(path, s.mem); err != nil {
			return nil, err
		}
	}
	_, err := s.load()
	return s, err
}

func (s *Sim) load() (simState, error) {
	if s.path == "" {
		return simState{Installed: s.mem.Installed, Offered: slices.Clone(s.mem.Offered)}, nil
	}
	var st simState
	_, err := readJSON(s.path, &st)
	return st, err
}

func (s *Sim) save(st simState) error {
	if s.path == "" {
		s.mem = st
		return nil
	}
	return writeJSON(s.path, st)
}

// Installed implements Packages and Catalog.
func (s *Sim) Installed(context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.load()
	return st.Installed, err
}

// Available implements Catalog.
func (s *Sim) Available(context.Context) ([]Candidate, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.load()
	return st.Offered, err
}

// Offer adds version to channel, as publishing a release to the
// repository would.
func (s *Sim) Offer(c Candidate) error {
	if err := ValidVersion(c.Version); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.load()
	if err != nil {
		return err
	}
	st.Offered = append(st.Offered, c)
	return s.save(st)
}

const simKept = "sim:/var/cache/raspi-mcp/raspi-mcp_"

// Keep implements Packages: any version the repository offers, or the
// installed one, can be kept.
func (s *Sim) Keep(_ context.Context, version string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.load()
	if err != nil {
		return "", err
	}
	if version != st.Installed && !st.offers(version) {
		return "", fmt.Errorf("selfupdate: sim: no package file for raspi-mcp %s", version)
	}
	return simKept + version + "_all.deb", nil
}

// Install implements Packages.
func (s *Sim) Install(_ context.Context, version string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.load()
	if err != nil {
		return err
	}
	if !st.offers(version) {
		return fmt.Errorf("selfupdate: sim: E: Version '%s' for 'raspi-mcp' was not found", version)
	}
	st.Installed = version
	return s.save(st)
}

// Reinstall implements Packages.
func (s *Sim) Reinstall(_ context.Context, path string) error {
	v, ok := strings.CutPrefix(path, simKept)
	v, ok2 := strings.CutSuffix(v, "_all.deb")
	if !ok || !ok2 {
		return fmt.Errorf("selfupdate: sim: %s is not a kept package file", path)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.load()
	if err != nil {
		return err
	}
	st.Installed = v
	return s.save(st)
}

func (st simState) offers(v string) bool {
	return slices.ContainsFunc(st.Offered, func(c Candidate) bool { return c.Version == v })
}
