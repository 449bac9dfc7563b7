package sysinfo

import (
	"context"
	"fmt"
	"strings"
)

// Filesystem is the use of one mounted file system, counted like df.
type Filesystem struct {
	Mountpoint string // "/", "/boot/firmware"
	Device     string // "/dev/mmcblk0p2"
	Type       string // "ext4", "vfat"
	TotalBytes uint64
	UsedBytes  uint64
}

// FilesystemSource is implemented by [*Linux] and [*Sim]. Like
// [CounterSource] it is separate from [Source], so a Source need not list
// its mounts: callers check for it with a type assertion.
type FilesystemSource interface {
	Filesystems(ctx context.Context) ([]Filesystem, error)
}

var (
	_ FilesystemSource = (*Linux)(nil)
	_ FilesystemSource = (*Sim)(nil)
)

// Mount is one line of /proc/self/mounts.
type Mount struct {
	Device, Mountpoint, Type string
}

// ParseMounts parses /proc/self/mounts (the fstab format): device, mount
// point and type, with the kernel's octal escapes (\040 for a space)
// decoded. Options and the two numbers are ignored. The text is copied
// once and the fields share it, so b may be reused afterwards.
func ParseMounts(b []byte) ([]Mount, error) {
	s := string(b)
	out := make([]Mount, 0, strings.Count(s, "\n"))
	n := 0
	for line := range strings.Lines(s) {
		n++
		dev, rest := nextField(strings.TrimRight(line, "\n"))
		mp, rest := nextField(rest)
		typ, _ := nextField(rest)
		if dev == "" {
			continue
		}
		if typ == "" {
			return nil, fmt.Errorf("sysinfo: parse /proc/self/mounts: line %d %q: want device, mount point and type", n, strings.TrimSpace(line))
		}
		out = append(out, Mount{Device: unescapeMount(dev), Mountpoint: unescapeMount(mp), Type: typ})
	}
	return out, nil
}

// unescapeMount decodes the kernel's \ooo escapes of space, tab, newline
// and backslash; anything else is kept as it is.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

// storedFS says whether a mount holds the device's data: a block device
// (not a loop image such as a snap), of a writable kind. Pseudo file
// systems (proc, sysfs, tmpfs, cgroup) have no /dev source and are left
// out, as df -x tmpfs would.
func storedFS(m Mount) bool {
	if !strings.HasPrefix(m.Device, "/dev/") || strings.HasPrefix(m.Device, "/dev/loop") {
		return false
	}
	switch m.Type {
	case "squashfs", "iso9660", "udf":
		return false
	}
	return true
}

// Filesystems lists the mounted block-device file systems with their use,
// each device once (its first mount point: a bind mount repeats it). A
// mount statfs cannot read (gone since the list was read, no permission)
// is left out rather than failing the rest.
func (l *Linux) Filesystems(ctx context.Context) ([]Filesystem, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ms, err := parseFile(l, "proc/self/mounts", ParseMounts)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []Filesystem
	for _, m := range ms {
		if !storedFS(m) || seen[m.Device] {
			continue
		}
		total, free, err := l.statfs(m.Mountpoint)
		if err != nil {
			continue
		}
		seen[m.Device] = true
		out = append(out, Filesystem{Mountpoint: m.Mountpoint, Device: m.Device, Type: m.Type, TotalBytes: total, UsedBytes: subSat(total, free)})
	}
	return out, nil
}

// Simulated boot partition: the 512 MiB FAT of Raspberry Pi OS bookworm.
const (
	simBootTotal = 512 << 20
	simBootUsed  = 63 << 20
)

// Filesystems reports the card's two partitions, as Raspberry Pi OS
// mounts them.
func (s *Sim) Filesystems(ctx context.Context) ([]Filesystem, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return []Filesystem{
		{Mountpoint: "/", Device: "/dev/mmcblk0p2", Type: "ext4", TotalBytes: simDiskTotal, UsedBytes: simDiskUsed},
		{Mountpoint: "/boot/firmware", Device: "/dev/mmcblk0p1", Type: "vfat", TotalBytes: simBootTotal, UsedBytes: simBootUsed},
	}, nil
}
