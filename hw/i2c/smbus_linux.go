//go:build linux

package i2c

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// i2c-dev ioctls and SMBus transaction types, from <linux/i2c-dev.h> and
// <linux/i2c.h>; x/sys/unix does not carry them.
const (
	ioctlSlave = 0x0703 // I2C_SLAVE: set the address; EBUSY if a driver holds it
	ioctlFuncs = 0x0705 // I2C_FUNCS: adapter functionality mask
	ioctlSMBus = 0x0720 // I2C_SMBUS: one SMBus transaction

	smbusWrite = 0
	smbusRead  = 1

	sizeQuick        = 0 // I2C_SMBUS_QUICK
	sizeByte         = 1 // I2C_SMBUS_BYTE: send or receive one byte
	sizeByteData     = 2 // I2C_SMBUS_BYTE_DATA: command byte + one data byte
	sizeI2CBlockData = 8 // I2C_SMBUS_I2C_BLOCK_DATA: command byte + 1..32 bytes, no count byte on the wire

	funcI2C                = 0x00000001
	funcSMBusQuick         = 0x00010000
	funcSMBusReadByte      = 0x00020000
	funcSMBusWriteByte     = 0x00040000
	funcSMBusReadByteData  = 0x00080000
	funcSMBusWriteByteData = 0x00100000
	funcSMBusReadI2CBlock  = 0x04000000
	funcSMBusWriteI2CBlock = 0x08000000
)

// smbusData is union i2c_smbus_data: block[0] is the length, then up to 32
// bytes (34 with the PEC/spare byte the kernel copies).
type smbusData [34]byte

// smbusIoctlData is struct i2c_smbus_ioctl_data. Go lays it out as C does on
// both 32- and 64-bit: two bytes, padding, a 32-bit size at offset 4, the
// pointer at offset 8. data is a real pointer, not a uintptr, so the
// garbage collector and stack moves keep it valid.
type smbusIoctlData struct {
	readWrite uint8
	command   uint8
	size      uint32
	data      *smbusData
}

// smbusDev is a handle of /dev/i2c-N used for SMBus transactions. The
// address set by I2C_SLAVE belongs to the handle, so mu keeps "set address,
// transfer" pairs whole.
type smbusDev struct {
	bus   int
	funcs uintptr

	mu sync.Mutex
	fd int // -1 once closed
}

func openSMBus(bus int) (*smbusDev, error) {
	path := fmt.Sprintf("/dev/i2c-%d", bus)
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil, fmt.Errorf("open %s: %w (is the bus enabled, e.g. dtparam=i2c_arm=on, and the i2c-dev module loaded?)", path, err)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	s := &smbusDev{bus: bus, fd: fd}
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), ioctlFuncs, uintptr(unsafe.Pointer(&s.funcs))); errno != 0 {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("%s: I2C_FUNCS: %w", path, errno)
	}
	return s, nil
}

// plainI2C reports whether the adapter does I2C_RDWR transfers.
func (s *smbusDev) plainI2C() bool { return s.funcs&funcI2C != 0 }

func (s *smbusDev) has(f uintptr) bool { return s.funcs&f == f }

func (s *smbusDev) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fd < 0 {
		return nil
	}
	err := unix.Close(s.fd)
	s.fd = -1
	if err != nil {
		return fmt.Errorf("close /dev/i2c-%d: %w", s.bus, err)
	}
	return nil
}

// setAddr must be called with s.mu held.
func (s *smbusDev) setAddr(addr uint16) error {
	if s.fd < 0 {
		return fmt.Errorf("/dev/i2c-%d is closed", s.bus)
	}
	if addr > 0x7F {
		return fmt.Errorf("address 0x%x is not a 7-bit address", addr)
	}
	return unix.IoctlSetInt(s.fd, ioctlSlave, int(addr))
}

// xfer is one I2C_SMBUS ioctl; it must be called with s.mu held.
func (s *smbusDev) xfer(rw, cmd uint8, size uint32, d *smbusData) error {
	args := smbusIoctlData{readWrite: rw, command: cmd, size: size, data: d}
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(s.fd), ioctlSMBus, uintptr(unsafe.Pointer(&args))); errno != 0 {
		return errno
	}
	return nil
}

// probe is i2cdetect's probe: I2C_SLAVE (not I2C_SLAVE_FORCE, so a
// driver-held address comes back EBUSY and is reported Busy without being
// touched), then an SMBus quick write or receive byte. Any transfer error
// reads as Absent, as in i2cdetect: adapters report a NACK as ENXIO,
// EREMOTEIO, EIO or ENODEV depending on the driver.
func (s *smbusDev) probe(addr uint16, op ProbeOp) (Presence, error) {
	switch op {
	case ProbeQuickWrite:
		if !s.has(funcSMBusQuick) {
			return Absent, errUnsupportedf("/dev/i2c-%d cannot do an SMBus quick write", s.bus)
		}
	case ProbeReadByte:
		if !s.has(funcSMBusReadByte) {
			return Absent, errUnsupportedf("/dev/i2c-%d cannot do an SMBus receive byte", s.bus)
		}
	default:
		return Absent, fmt.Errorf("unknown probe %v", op)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.setAddr(addr); errors.Is(err, unix.EBUSY) {
		return Busy, nil
	} else if err != nil {
		return Absent, err
	}
	var err error
	if op == ProbeQuickWrite {
		err = s.xfer(smbusWrite, 0, sizeQuick, nil)
	} else {
		var d smbusData
		err = s.xfer(smbusRead, 0, sizeByte, &d)
	}
	if err != nil {
		return Absent, nil
	}
	return Present, nil
}

// tx maps an I2C transfer onto the SMBus command that puts the same bytes
// on the wire, for adapters without I2C_RDWR:
//
//	w=[c]          r=[1]      read byte data (or I2C block read of 1)
//	w=[c]          r=[2..32]  I2C block read
//	w=nil          r=[1]      receive byte
//	w=[c]          r=nil      send byte
//	w=[c,v]        r=nil      write byte data (or I2C block write of 1)
//	w=[c,v...]     r=nil      I2C block write of up to 32 bytes
//
// Anything else (a longer write before a read, a multi-byte plain read) has
// no SMBus equivalent and is refused rather than split, since splitting
// would change what the chip sees. An empty transfer does nothing, as in
// periph.
func (s *smbusDev) tx(addr uint16, w, r []byte) error {
	if len(w) == 0 && len(r) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.setAddr(addr); errors.Is(err, unix.EBUSY) {
		return fmt.Errorf("smbus: address 0x%02x is in use by a kernel driver: %w", addr, err)
	} else if err != nil {
		return fmt.Errorf("smbus: %w", err)
	}
	var d smbusData
	var err error
	switch {
	case len(w) == 0 && len(r) == 1 && s.has(funcSMBusReadByte):
		err = s.xfer(smbusRead, 0, sizeByte, &d)
		r[0] = d[0]
	case len(w) == 1 && len(r) == 1 && s.has(funcSMBusReadByteData):
		err = s.xfer(smbusRead, w[0], sizeByteData, &d)
		r[0] = d[0]
	case len(w) == 1 && len(r) >= 1 && len(r) <= MaxTransfer && s.has(funcSMBusReadI2CBlock):
		d[0] = byte(len(r))
		if err = s.xfer(smbusRead, w[0], sizeI2CBlockData, &d); err == nil {
			if int(d[0]) < len(r) {
				return fmt.Errorf("smbus: addr 0x%02x: short block read: %d of %d bytes", addr, d[0], len(r))
			}
			copy(r, d[1:1+len(r)])
		}
	case len(w) == 1 && len(r) == 0 && s.has(funcSMBusWriteByte):
		err = s.xfer(smbusWrite, w[0], sizeByte, nil)
	case len(w) == 2 && len(r) == 0 && s.has(funcSMBusWriteByteData):
		d[0] = w[1]
		err = s.xfer(smbusWrite, w[0], sizeByteData, &d)
	case len(w) >= 2 && len(w) <= MaxTransfer+1 && len(r) == 0 && s.has(funcSMBusWriteI2CBlock):
		d[0] = byte(len(w) - 1)
		copy(d[1:], w[1:])
		err = s.xfer(smbusWrite, w[0], sizeI2CBlockData, &d)
	default:
		return fmt.Errorf("smbus: /dev/i2c-%d has no I2C transfers and no SMBus command for a %d-byte write then %d-byte read: %w",
			s.bus, len(w), len(r), errors.ErrUnsupported)
	}
	if err != nil {
		return fmt.Errorf("smbus: addr 0x%02x: %w", addr, err)
	}
	return nil
}
