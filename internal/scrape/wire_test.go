package scrape

import (
	"bufio"
	"bytes"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

var testFams = []Family{
	{Name: "raspi_temperature_celsius", Type: Gauge, Help: "SoC temperature.", Labels: []string{"source"}},
	{Name: "raspi_network_receive_bytes_total", Type: Counter, Help: "Bytes received.", Labels: []string{"interface"}},
	{Name: "raspi_load1", Type: Gauge, Help: "Load."},
}

func testSnapshot() *Snapshot {
	return &Snapshot{Families: testFams, ProcessPID: 4242, ProcessNamespace: "raspi_mcp", Points: []Point{
		{Family: 0, Value: 51.5, Labels: []string{"thermal_zone0"}},
		{Family: 1, Value: math.Inf(1), Labels: []string{"wlan\xff"}}, // not UTF-8: the renderer's to refuse
		{Family: 2, Value: math.NaN()},
		{Family: 2, Value: -0.25},
	}}
}

// decodeFrame reads one frame of b as Serve or Process would.
func decodeFrame(t *testing.T, b []byte) []byte {
	t.Helper()
	payload, err := readFrame(bufio.NewReader(bytes.NewReader(b)), nil)
	if err != nil {
		t.Fatal(err)
	}
	return payload
}

// Values and labels arrive exactly as sent, NaN, infinities and bytes that
// are not UTF-8 included; the family table only when it is sent.
func TestRequestRoundTrip(t *testing.T) {
	s := testSnapshot()
	accept, got, err := decodeRequest(decodeFrame(t, appendRequest(nil, "application/openmetrics-text", s, true)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if accept != "application/openmetrics-text" || !SameFamilies(got.Families, testFams) || got.ProcessPID != 4242 || got.ProcessNamespace != "raspi_mcp" {
		t.Fatalf("accept %q, snapshot %+v", accept, got)
	}
	if len(got.Points) != 4 || got.Points[0].Value != 51.5 || !math.IsInf(got.Points[1].Value, 1) || !math.IsNaN(got.Points[2].Value) ||
		got.Points[1].Labels[0] != "wlan\xff" || got.Points[3].Value != -0.25 || got.Points[2].Labels != nil {
		t.Fatalf("points %+v", got.Points)
	}

	// Without the table, the previous one is kept; with none before, the
	// request has no families at all.
	prev := []Family{testFams[0], testFams[1], testFams[2]}
	_, got, err = decodeRequest(decodeFrame(t, appendRequest(nil, "", s, false)), prev)
	if err != nil || &got.Families[0] != &prev[0] {
		t.Fatalf("without the table: %v, %+v", err, got.Families)
	}
	if _, _, err := decodeRequest(decodeFrame(t, appendRequest(nil, "", s, false)), nil); err == nil || !strings.Contains(err.Error(), "family 0 of 0") {
		t.Fatalf("points without any table: %v", err)
	}
}

func TestResponseRoundTrip(t *testing.T) {
	in := Page{ContentType: "text/plain; version=0.0.4", Body: []byte("raspi_load1 0.5\n"), Problems: []string{"a", "b"}}
	p, msg, err := decodeResponse(decodeFrame(t, appendResponse(nil, in, "")))
	if err != nil || msg != "" || !reflect.DeepEqual(p, in) {
		t.Fatalf("%+v %q %v", p, msg, err)
	}
	p, msg, err = decodeResponse(decodeFrame(t, appendResponse(nil, Page{}, "promexp: no metrics")))
	if err != nil || msg != "promexp: no metrics" || p.Body != nil {
		t.Fatalf("%+v %q %v", p, msg, err)
	}
}

// Every corrupt request is refused with a reason, and none makes the
// decoder allocate what its counts claim.
func TestDecodeRefusesCorruptRequests(t *testing.T) {
	good := decodeFrame(t, appendRequest(nil, "x", testSnapshot(), true))
	for n := range len(good) {
		if _, _, err := decodeRequest(good[:n], nil); err == nil {
			t.Fatalf("a request cut at %d of %d bytes was accepted", n, len(good))
		}
	}
	if _, _, err := decodeRequest(append(bytes.Clone(good), 0), nil); err == nil || !strings.Contains(err.Error(), "after the last point") {
		t.Fatalf("trailing byte: %v", err)
	}
	// accept "", no table, pid 0, namespace "", then 2^62 points.
	huge := []byte{0, 0, 0, 0, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40}
	if _, _, err := decodeRequest(huge, nil); err == nil || !strings.Contains(err.Error(), "items in") {
		t.Fatalf("a count past the payload: %v", err)
	}
	bad := []Family{{Name: "x", Type: 9}}
	if _, _, err := decodeRequest(decodeFrame(t, appendRequest(nil, "", &Snapshot{Families: bad}, true)), nil); err == nil || !strings.Contains(err.Error(), "type 9") {
		t.Fatalf("a family of type 9: %v", err)
	}
}

func TestReadFrameRefusesBadFrames(t *testing.T) {
	for name, b := range map[string][]byte{
		"too long":      {0xff, 0xff, 0xff, 0xff, 0x7f},
		"cut":           {5, wireVersion, 1},
		"other version": {2, 9, 0},
		"empty":         {0},
	} {
		_, err := readFrame(bufio.NewReader(bytes.NewReader(b)), nil)
		if !errors.Is(err, ErrFrame) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
