package privhelper

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/hw/power"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

// handler is a registered method after its types have been erased.
type handler func(ctx context.Context, params json.RawMessage) (any, error)

// route is a registered method: its handler and its class, which bounds it.
// bound, set for a method whose request says how long it may wait
// (proto.Waiter, the Approval class), is the bound of one request.
type route struct {
	h     handler
	class proto.Class
	bound func(params json.RawMessage) (time.Duration, bool)
}

// handle registers h for m. The constraint makes every request type carry a
// Validate, so a new method cannot be added without one; decoding is strict
// and validation happens here, before h sees anything.
func handle[Req proto.Validator, Resp any](mux map[string]route, m proto.Method[Req, Resp], h func(context.Context, Req) (Resp, error)) {
	name := m.Name
	register(mux, name, m.Class, func(ctx context.Context, params json.RawMessage) (any, error) {
		var req Req
		if err := decodeReq(name, params, &req); err != nil {
			return nil, err
		}
		if err := req.Validate(); err != nil {
			return nil, err
		}
		return h(ctx, req)
	})
	if _, ok := any(new(Req)).(proto.Waiter); ok && m.Class == proto.Approval {
		rt := mux[name]
		rt.bound = func(params json.RawMessage) (time.Duration, bool) {
			var req Req
			if decodeParams(params, &req) != nil || req.Validate() != nil {
				return 0, false // the handler refuses it at once
			}
			w, _ := any(req).(proto.Waiter)
			return proto.ApprovalBound(w.Wait()), true
		}
		mux[name] = rt
	}
}

// register adds h to mux under name, which must be new.
func register(mux map[string]route, name string, class proto.Class, h handler) {
	if _, dup := mux[name]; dup {
		panic(fmt.Sprintf("privhelper: method %q registered twice", name))
	}
	mux[name] = route{h: h, class: class}
}

// decodeReq decodes params into v, a pointer to a request: handle's untyped
// part, compiled once rather than once per method.
func decodeReq(name string, params json.RawMessage, v any) error {
	if err := decodeParams(params, v); err != nil {
		return proto.Errorf(proto.CodeInvalidArgument, "privhelper: %s: bad params: %v", name, err)
	}
	return nil
}

// decodeParams treats absent or null params as an empty object, so methods
// without parameters need not send any, then decodes strictly.
func decodeParams(params json.RawMessage, v any) error {
	if p := bytes.TrimSpace(params); len(p) == 0 || bytes.Equal(p, []byte("null")) {
		params = json.RawMessage("{}")
	}
	return proto.Decode(params, v)
}

func (s *Server) status(context.Context, proto.StatusReq) (proto.StatusResp, error) {
	return proto.StatusResp{
		Helper:    s.helper,
		PID:       os.Getpid(),
		StartedAt: s.started,
		Backend:   s.backend,
		Methods:   append([]string(nil), s.methods...),
	}, nil
}

func (s *Server) powerSchedule(ctx context.Context, r proto.PowerScheduleReq) (proto.PowerScheduleResp, error) {
	p := peerFrom(ctx)
	sw := powerSwitch(r.Action)
	if sw == config.NoSwitch { // Validate refuses it first; no switch is no permission
		return proto.PowerScheduleResp{}, denied("power action %q is disabled", r.Action).With("action", r.Action)
	}
	if err := s.require(sw, "power action %q is disabled", r.Action); err != nil {
		return proto.PowerScheduleResp{}, err.(*proto.Error).With("action", r.Action)
	}
	// Microsecond precision is what logind keeps, so power.state later
	// reports exactly the time returned here.
	at := time.Now().Add(time.Duration(r.DelaySeconds) * time.Second).UTC().Truncate(time.Microsecond)
	if !r.At.IsZero() {
		at = r.At.UTC().Truncate(time.Microsecond)
	}
	if err := s.power.Schedule(ctx, power.Action(r.Action), at); err != nil {
		return proto.PowerScheduleResp{}, err
	}
	s.log.Info("privhelper: power action scheduled", "action", r.Action, "at", at,
		"delay_seconds", r.DelaySeconds, "reason", r.Reason, "uid", p.UID, "pid", p.PID)
	return proto.PowerScheduleResp{Action: r.Action, At: at}, nil
}

// powerCancel is allowed whatever the policy: cancelling is the safe direction.
func (s *Server) powerCancel(ctx context.Context, _ proto.PowerCancelReq) (proto.PowerCancelResp, error) {
	c, ok, err := s.power.Cancel(ctx)
	if err != nil {
		return proto.PowerCancelResp{}, err
	}
	if ok {
		p := peerFrom(ctx)
		s.log.Info("privhelper: power action cancelled", "action", c.Action, "at", c.At, "uid", p.UID, "pid", p.PID)
	}
	return proto.PowerCancelResp{Cancelled: ok, Action: string(c.Action)}, nil
}

func (s *Server) powerState(ctx context.Context, _ proto.PowerStateReq) (proto.PowerStateResp, error) {
	sc, ok, err := s.power.Scheduled(ctx)
	if err != nil {
		return proto.PowerStateResp{}, err
	}
	if !ok {
		return proto.PowerStateResp{}, nil
	}
	return proto.PowerStateResp{Scheduled: true, Action: string(sc.Action), At: sc.At.UTC()}, nil
}
