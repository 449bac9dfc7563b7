package netinfo

import (
	"context"
	"testing"
)

func TestSimNetwork(t *testing.T) {
	ctx := context.Background()
	s := Sim{Stats: func(context.Context) (map[string]Stats, error) {
		return map[string]Stats{"eth0": {BytesRecv: 9000, BytesSent: 3000}, "wlan0": {BytesRecv: 50}}, nil
	}}
	ifs, err := s.Interfaces(ctx)
	if err != nil || len(ifs) != 3 {
		t.Fatalf("interfaces %v, %v", ifs, err)
	}
	if ifs[1].Name != "eth0" || ifs[1].Stats.BytesRecv != 9000 || ifs[0].Stats.BytesSent != 1000 || ifs[2].Wireless == nil || ifs[2].Stats.BytesRecv != 50 {
		t.Errorf("counters or kinds: %+v", ifs)
	}
	if ifs, _ := (Sim{}).Interfaces(ctx); ifs[1].Stats != (Stats{}) {
		t.Errorf("no Stats gives zero counters: %+v", ifs[1].Stats)
	}
	all, _ := s.Connections(ctx, nil)
	udp, err := s.Connections(ctx, []string{"udp"})
	if err != nil || len(udp) != 1 || udp[0].LocalPort != 5353 || len(all) <= len(udp) {
		t.Errorf("udp: %v %v of %d", udp, err, len(all))
	}
	if _, err := s.Connections(ctx, []string{"sctp"}); err == nil {
		t.Error("an unknown protocol was accepted")
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Routes(cancelled); err == nil {
		t.Error("a cancelled context was ignored")
	}
}
