package sysinfo

import (
	"context"
	"errors"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
)

// A Raspberry Pi OS mount table: the card's two partitions, a bind mount
// of the root, a snap's loop image, a USB disk whose mount point has a
// space, and the pseudo file systems.
const piMounts = `/dev/mmcblk0p2 / ext4 rw,noatime 0 0
devtmpfs /dev devtmpfs rw,relatime,size=1867304k,nr_inodes=466826,mode=755 0 0
proc /proc proc rw,relatime 0 0
sysfs /sys sysfs rw,nosuid,nodev,noexec,relatime 0 0
tmpfs /run tmpfs rw,nosuid,nodev,size=788896k,nr_inodes=819200,mode=755 0 0
/dev/mmcblk0p1 /boot/firmware vfat rw,relatime,fmask=0022,dmask=0022 0 2
/dev/mmcblk0p2 /var/lib/docker/bind ext4 rw,noatime 0 0
/dev/loop0 /snap/core22/1380 squashfs ro,nodev,relatime 0 0
/dev/sda1 /media/pi/USB\040Disk exfat rw,nosuid,nodev,relatime 0 0
/dev/sdb1 /mnt/gone ext4 rw 0 0
`

func TestLinuxFilesystems(t *testing.T) {
	root := fstest.MapFS{"proc/self/mounts": {Data: []byte(piMounts)}}
	sizes := map[string][2]uint64{
		"/":                  {30 << 30, 20 << 30},
		"/boot/firmware":     {512 << 20, 449 << 20},
		"/media/pi/USB Disk": {64 << 30, 64 << 30},
	}
	l := NewLinux(LinuxOptions{Root: root, Statfs: func(p string) (uint64, uint64, error) {
		s, ok := sizes[p]
		if !ok {
			return 0, 0, errors.New("no such file system")
		}
		return s[0], s[1], nil
	}})
	got, err := l.Filesystems(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []Filesystem{
		{Mountpoint: "/", Device: "/dev/mmcblk0p2", Type: "ext4", TotalBytes: 30 << 30, UsedBytes: 10 << 30},
		{Mountpoint: "/boot/firmware", Device: "/dev/mmcblk0p1", Type: "vfat", TotalBytes: 512 << 20, UsedBytes: 63 << 20},
		{Mountpoint: "/media/pi/USB Disk", Device: "/dev/sda1", Type: "exfat", TotalBytes: 64 << 30, UsedBytes: 0},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("Filesystems (-want +got):\n%s", d)
	}
}

func TestParseMountsErrors(t *testing.T) {
	if _, err := ParseMounts([]byte("/dev/sda1 /mnt\n")); err == nil {
		t.Fatal("a line without a type parsed")
	}
	if _, err := NewLinux(LinuxOptions{Root: fstest.MapFS{}}).Filesystems(context.Background()); err == nil {
		t.Fatal("a missing mount table is no error")
	}
	m, err := ParseMounts([]byte(`/dev/x /a\134b\040c\07 ext4 rw 0 0` + "\n"))
	if err != nil || m[0].Mountpoint != `/a\b c\07` {
		t.Fatalf("escapes: %q %v", m, err)
	}
}

func TestSimFilesystemsMatchHealth(t *testing.T) {
	s := NewSim(SimOptions{})
	fss, err := s.Filesystems(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	h, err := s.Health(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if fss[0].Mountpoint != "/" || fss[0].TotalBytes != h.DiskTotalBytes || fss[0].UsedBytes != h.DiskUsedBytes {
		t.Fatalf("sim root %+v, health says %d of %d", fss[0], h.DiskUsedBytes, h.DiskTotalBytes)
	}
}
