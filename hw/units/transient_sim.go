package units

import (
	"context"
	"fmt"
	"sync"
)

// SimProgram is a simulated command for SimTransient: it runs until it
// returns its exit status, and must return soon after ctx ends (that is a
// Stop; its status is then ignored and the run reported killed by SIGTERM).
type SimProgram func(ctx context.Context, argv, env []string) int

// SimTransient is a Transient for --sim and tests: nothing is executed;
// Argv[0] picks a SimProgram from Programs, which runs in a goroutine of
// this process. An unknown Argv[0] fails as systemd's 203/EXEC does.
// Runs live in memory: only the helper process starts them.
type SimTransient struct {
	Programs map[string]SimProgram

	mu   sync.Mutex
	runs map[string]*simRun
}

var _ Transient = (*SimTransient)(nil)

type simRun struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when the program has returned
	status RunStatus     // final once done is closed
}

// simPIDBase is where simulated run PIDs start, far from the simulated
// process table's.
const simPIDBase = 40000

func (s *SimTransient) Start(ctx context.Context, spec TransientSpec) error {
	name, err := checkSpec(spec)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("units: start transient %q: %w", name, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.runs == nil {
		s.runs = map[string]*simRun{}
	}
	if _, ok := s.runs[name]; ok {
		return fmt.Errorf("units: start transient %q: %w", name, ErrTransientExists)
	}
	rctx, cancel := context.WithCancel(context.Background())
	r := &simRun{cancel: cancel, done: make(chan struct{}), status: RunStatus{Name: name, Running: true, PID: simPIDBase + len(s.runs)}}
	s.runs[name] = r
	prog := s.Programs[spec.Argv[0]]
	if prog == nil {
		r.status = RunStatus{Name: name, Exited: true, Code: 203, Result: "exit-code"}
		close(r.done)
		return nil
	}
	argv, env := append([]string(nil), spec.Argv...), append([]string(nil), spec.Env...)
	go func() {
		code := prog(rctx, argv, env)
		st := RunStatus{Name: name, Exited: true, Code: code, Result: "success"}
		if rctx.Err() != nil {
			st = RunStatus{Name: name, Exited: true, Signal: 15, Result: "signal"}
		} else if code != 0 {
			st.Result = "exit-code"
		}
		s.mu.Lock()
		r.status = st
		s.mu.Unlock()
		cancel()
		close(r.done)
	}()
	return nil
}

func (s *SimTransient) run(name string) (string, *simRun, error) {
	name, err := Normalize(name)
	if err != nil {
		return "", nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.runs[name]
	if !ok {
		return name, nil, notFound(name)
	}
	return name, r, nil
}

func (s *SimTransient) Status(ctx context.Context, name string) (RunStatus, error) {
	_, r, err := s.run(name)
	if err != nil {
		return RunStatus{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return r.status, nil
}

func (s *SimTransient) Wait(ctx context.Context, name string) (RunStatus, error) {
	name, r, err := s.run(name)
	if err != nil {
		return RunStatus{}, err
	}
	select {
	case <-r.done:
	case <-ctx.Done():
		st, _ := s.Status(ctx, name)
		return st, fmt.Errorf("units: wait for %q: %w", name, ctx.Err())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.runs, name)
	return r.status, nil
}

func (s *SimTransient) Stop(ctx context.Context, name string) error {
	name, r, err := s.run(name)
	if err != nil {
		return err
	}
	r.cancel()
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("units: stop %q: %w", name, ctx.Err())
	}
}
