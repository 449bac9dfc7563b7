package i2c

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func reg(r uint8) *uint8 { return &r }

func TestReadWriteRegRoundTrip(t *testing.T) {
	mem := NewMemChip(0x50)
	b := NewSimBus(mem)
	data := []byte{0xde, 0xad, 0xbe, 0xef}
	if err := WriteReg(b, 0x50, reg(0x10), data); err != nil {
		t.Fatal(err)
	}
	if got := mem.Get(0x10, 4); !bytes.Equal(got, data) {
		t.Errorf("chip holds % x, want % x", got, data)
	}
	got, err := ReadReg(b, 0x50, reg(0x10), 4)
	if err != nil || !bytes.Equal(got, data) {
		t.Errorf("ReadReg = % x, %v; want % x", got, err, data)
	}
	// reg nil: a plain read from the pointer, which the last read left at 0x14.
	mem.Set(0x14, 0x42)
	if got, err := ReadReg(b, 0x50, nil, 1); err != nil || got[0] != 0x42 {
		t.Errorf("plain ReadReg = % x, %v; want 42", got, err)
	}
	// reg nil on write: the data goes out as is (its first byte is the pointer).
	if err := WriteReg(b, 0x50, nil, []byte{0x20, 0x07}); err != nil {
		t.Fatal(err)
	}
	if got := mem.Get(0x20, 1); got[0] != 0x07 {
		t.Errorf("plain WriteReg stored 0x%02x at 0x20", got[0])
	}
	// The transactions on the wire.
	txs := b.Transactions()
	kinds := []string{}
	for _, tx := range txs {
		kinds = append(kinds, tx.Kind())
	}
	if want := "write write-read read write"; strings.Join(kinds, " ") != want {
		t.Errorf("transactions %v, want %s", kinds, want)
	}
	if !bytes.Equal(txs[0].W, []byte{0x10, 0xde, 0xad, 0xbe, 0xef}) {
		t.Errorf("first write % x", txs[0].W)
	}
}

func TestReadWriteRegBounds(t *testing.T) {
	b := NewSimBus(NewMemChip(0x50))
	for _, n := range []int{0, -1, MaxTransfer + 1} {
		if _, err := ReadReg(b, 0x50, reg(0), n); err == nil || !strings.Contains(err.Error(), "outside 1..32") {
			t.Errorf("ReadReg n=%d: err %v", n, err)
		}
	}
	if got, err := ReadReg(b, 0x50, reg(0), MaxTransfer); err != nil || len(got) != MaxTransfer {
		t.Errorf("ReadReg n=32: %d bytes, %v", len(got), err)
	}
	for _, n := range []int{0, MaxTransfer + 1} {
		if err := WriteReg(b, 0x50, reg(0), make([]byte, n)); err == nil || !strings.Contains(err.Error(), "outside 1..32") {
			t.Errorf("WriteReg %d bytes: err %v", n, err)
		}
	}
	if err := WriteReg(b, 0x50, reg(0), make([]byte, MaxTransfer)); err != nil {
		t.Errorf("WriteReg 32 bytes: %v", err)
	}
	for _, a := range []uint16{0x00, 0x02, 0x78, 0x7F, 0x100} {
		if _, err := ReadReg(b, a, nil, 1); err == nil || !strings.Contains(err.Error(), "outside 0x03..0x77") {
			t.Errorf("ReadReg addr 0x%x: err %v", a, err)
		}
		if err := WriteReg(b, a, nil, []byte{0}); err == nil || !strings.Contains(err.Error(), "outside 0x03..0x77") {
			t.Errorf("WriteReg addr 0x%x: err %v", a, err)
		}
	}
	if n := len(b.Transactions()); n != 2 {
		t.Errorf("%d transactions reached the bus, want only the 2 valid ones", n)
	}
}

func TestReadWriteRegErrors(t *testing.T) {
	b := NewSimBus(NewMemChip(0x50))
	_, err := ReadReg(b, 0x51, reg(0xd0), 2)
	if err == nil || !strings.Contains(err.Error(), "i2c: sim-i2c addr 0x51 reg 0xd0: read 2 bytes") || !strings.Contains(err.Error(), "no acknowledge") {
		t.Errorf("NACK: %v", err)
	}
	fault := errors.New("remote I/O error")
	b.SetFault(fault)
	if err := WriteReg(b, 0x50, nil, []byte{1}); !errors.Is(err, fault) {
		t.Errorf("fault: %v, want it wrapped", err)
	}
}
