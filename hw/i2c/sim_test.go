package i2c

import (
	"context"
	"strings"
	"sync"
	"testing"
)

func TestSimBusBasics(t *testing.T) {
	b := NewSimBus(NewMemChip(0x20))
	if err := b.Tx(0x21, nil, make([]byte, 1)); err == nil || !strings.Contains(err.Error(), "addr 0x21: no acknowledge") {
		t.Errorf("absent chip: %v", err)
	}
	if err := b.Tx(0x20, nil, nil); err != nil {
		t.Errorf("quick write to a chip: %v", err)
	}
	if err := b.Tx(0x80, nil, nil); err == nil {
		t.Error("10-bit address accepted")
	} // and not logged: it never reached the wire
	if p, err := b.Probe(0x20, ProbeQuickWrite); p != Present || err != nil {
		t.Errorf("Probe(0x20) = %v, %v", p, err)
	}
	if p, err := b.Probe(0x21, ProbeReadByte); p != Absent || err != nil {
		t.Errorf("Probe(0x21) = %v, %v", p, err)
	}
	txs := b.Transactions()
	if len(txs) != 4 || txs[0].Ack || !txs[1].Ack || txs[2].Kind() != "quick" || txs[3].Kind() != "read" || txs[3].Ack {
		t.Errorf("transactions %+v", txs)
	}
	b.ResetTransactions()
	if len(b.Transactions()) != 0 {
		t.Error("ResetTransactions kept some")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Tx(0x20, nil, nil); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("Tx after Close: %v", err)
	}
	if _, err := b.Probe(0x20, ProbeQuickWrite); err == nil {
		t.Error("Probe after Close succeeded")
	}
}

func TestSimBusDuplicatePanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "0x48") {
			t.Errorf("recover() = %v", r)
		}
	}()
	NewSimBus(NewTMP102(0x48), NewMemChip(0x48))
}

func TestSimBusLogBounded(t *testing.T) {
	b := NewSimBus(NewMemChip(0x20))
	for range simLogMax + 10 {
		_ = b.Tx(0x20, nil, nil)
	}
	if n := len(b.Transactions()); n > simLogMax {
		t.Errorf("log holds %d transactions", n)
	}
}

func TestSimBusConcurrent(t *testing.T) {
	bme, tmp := NewBME280(0x76), NewTMP102(0x48)
	b := NewSimBus(bme, tmp, NewMemChip(0x20))
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 50 {
				bme.SetEnv(float64(j), 1000, 50)
				tmp.SetTemp(float64(i))
				_, _ = ReadReg(b, 0x76, reg(0xF7), 8)
				_, _ = ReadReg(b, 0x48, reg(0), 2)
				_ = WriteReg(b, 0x20, reg(byte(i)), []byte{byte(j)})
			}
		})
	}
	wg.Wait()
}

func TestMemChipPointerWraps(t *testing.T) {
	m := NewMemChip(0x20)
	if err := m.Tx([]byte{0xFF, 1, 2}, nil); err != nil {
		t.Fatal(err)
	}
	if got := m.Get(0xFF, 2); got[0] != 1 || got[1] != 2 {
		t.Errorf("wrapped write: % x", got)
	}
	r := make([]byte, 2)
	_ = m.Tx([]byte{0xFF}, r)
	if r[0] != 1 || r[1] != 2 {
		t.Errorf("wrapped read: % x", r)
	}
}

func TestTMP102Sim(t *testing.T) {
	chip := NewTMP102(0x48)
	b := NewSimBus(chip)
	read := func(p uint8) uint16 {
		t.Helper()
		got, err := ReadReg(b, 0x48, &p, 2)
		if err != nil {
			t.Fatal(err)
		}
		return uint16(got[0])<<8 | uint16(got[1])
	}
	if cfg := read(1); cfg != 0x60A0 {
		t.Errorf("config after power-on 0x%04x, want 0x60A0", cfg)
	}
	if tl, th := read(2), read(3); tl != 0x4B00 || th != 0x5000 {
		t.Errorf("TLOW/THIGH 0x%04x/0x%04x, want 75 and 80 °C", tl, th)
	}
	for _, c := range []struct {
		temp float64
		reg  uint16
	}{
		{25, 0x1900}, {0.0625, 0x0010}, {-0.25, 0xFFC0}, {-25, 0xE700}, {127.9375, 0x7FF0}, {150, 0x7FF0}, {-55, 0xC900},
	} {
		chip.SetTemp(c.temp)
		if got := read(0); got != c.reg {
			t.Errorf("%v °C: register 0x%04x, want 0x%04x", c.temp, got, c.reg)
		}
	}
	// Extended mode: 13 bits, bit 0 set; 150 °C fits.
	if err := WriteReg(b, 0x48, reg(1), []byte{0x60, 0xB0}); err != nil {
		t.Fatal(err)
	}
	chip.SetTemp(150)
	if got := read(0); got != 0x4B01 {
		t.Errorf("150 °C extended: 0x%04x, want 0x4B01", got)
	}
	// R1R0 cannot be cleared; shutdown freezes the register until a
	// one-shot. Leaving extended mode, the 150 °C conversion reads as the
	// 12-bit maximum.
	if err := WriteReg(b, 0x48, reg(1), []byte{0x01, 0xA0}); err != nil {
		t.Fatal(err)
	}
	cfg := read(1)
	if cfg&0x6000 != 0x6000 || cfg&0x0100 == 0 || cfg&0x8000 != 0 {
		t.Errorf("config after shutdown write 0x%04x", cfg)
	}
	chip.SetTemp(20)
	if got := read(0); got != 0x7FF0 {
		t.Errorf("shut down: register 0x%04x, want the last conversion 0x7FF0", got)
	}
	if err := WriteReg(b, 0x48, reg(1), []byte{0x81, 0xA0}); err != nil {
		t.Fatal(err)
	}
	if cfg := read(1); cfg&0x8000 == 0 {
		t.Errorf("OS does not read 1 after a one-shot: 0x%04x", cfg)
	}
	if got := read(0); got != 0x1400 {
		t.Errorf("after one-shot: 0x%04x, want 20 °C = 0x1400", got)
	}
	// The temperature register is read-only; a pointer write alone moves the pointer.
	_ = WriteReg(b, 0x48, reg(0), []byte{0x12, 0x34})
	if got := read(0); got != 0x1400 {
		t.Errorf("temperature register was written: 0x%04x", got)
	}
}

func TestSimOpener(t *testing.T) {
	b1, b3 := NewSimBus(NewMemChip(0x20)), NewSimBus()
	o := NewSimOpener(map[int]*SimBus{3: b3, 1: b1})
	buses, err := o.Buses(context.Background())
	if err != nil || len(buses) != 2 || buses[0].Bus != 1 || buses[1].Bus != 3 || buses[0].Name != "sim-i2c" {
		t.Errorf("Buses = %+v, %v", buses, err)
	}
	if _, err := o.Open(2); err == nil || !strings.Contains(err.Error(), "bus 2") {
		t.Errorf("Open(2): %v", err)
	}
	h, err := o.Open(1)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := h.(Prober); !ok {
		t.Error("handle is not a Prober")
	}
	h2, _ := o.Open(1)
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if err := h.Tx(0x20, nil, nil); err == nil {
		t.Error("Tx on a closed handle succeeded")
	}
	if err := h2.Tx(0x20, nil, nil); err != nil {
		t.Errorf("closing one handle closed another: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := o.Buses(ctx); err == nil {
		t.Error("Buses ignored a cancelled context")
	}
}
