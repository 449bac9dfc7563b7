package sysinfo

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// cpuSampleMin is the shortest window CPU usage is computed over; at
	// USER_HZ=100 shorter windows are too coarse to mean anything.
	cpuSampleMin = 100 * time.Millisecond
	// cpuSampleMax is the oldest previous reading worth reusing; beyond it
	// the number would be an average over a stale period, not "now".
	cpuSampleMax = 60 * time.Second
	// execTimeout bounds vcgencmd, which can hang when the VideoCore
	// mailbox is busy.
	execTimeout = 2 * time.Second
)

// LinuxOptions configures [NewLinux]. Zero values mean the live machine.
type LinuxOptions struct {
	Root   fs.FS                                                                  // default os.DirFS("/"); paths inside are "proc/meminfo", "sys/...", "etc/os-release"
	Statfs func(path string) (totalBytes, freeBytes uint64, err error)            // default unix.Statfs on path like df: total = blocks*frsize, free = bfree*frsize
	Exec   func(ctx context.Context, name string, args ...string) ([]byte, error) // runs vcgencmd; default exec with a 2 s timeout, looking in PATH and /usr/bin; any error means "absent"
	Uname  func() (machine string, err error)                                     // default unix.Uname
	Now    func() time.Time                                                       // default time.Now
	// Sleep waits between two /proc/stat readings when there is no usable
	// previous one. Default: a timer that returns ctx.Err() when ctx ends
	// first. Tests inject one that advances a fake clock instead.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Linux reads a live or fixture file tree. Note that Statfs, Exec and Uname
// default to the live machine even when Root is a fixture.
type Linux struct {
	root   fs.FS
	statfs func(string) (uint64, uint64, error)
	exec   func(context.Context, string, ...string) ([]byte, error)
	uname  func() (string, error)
	now    func() time.Time
	sleep  func(context.Context, time.Duration) error

	// mu guards the previous /proc/stat reading, which lets frequent
	// Health calls skip the 100 ms sampling wait.
	mu      sync.Mutex
	prev    CPUTimes
	prevAt  time.Time
	hasPrev bool

	// Where the optional readings are is found once: sensors, firmware
	// nodes and vcgencmd do not come and go while the agent runs, and
	// searching for them (directory globs, a PATH lookup) was most of a
	// snapshot's cost when they are absent.
	find       sync.Once
	throttles  []string  // firmware get_throttled nodes, sorted
	rpiVolt    string    // the rpi_volt hwmon's in0_lcrit_alarm, "" if none
	hwmon      []hwmonIn // hwmon temperature inputs, in search order
	noVcgencmd atomic.Bool
	bufs       sync.Pool // *[]byte: one file at a time, reused across snapshots
}

// hwmonIn is one hwmon temperature input and the source name it reports.
type hwmonIn struct{ file, source string }

var _ Source = (*Linux)(nil)

// NewLinux returns a Source over o.Root, filling in live defaults.
func NewLinux(o LinuxOptions) *Linux {
	l := &Linux{root: o.Root, statfs: o.Statfs, exec: o.Exec, uname: o.Uname, now: o.Now, sleep: o.Sleep}
	if l.root == nil {
		l.root = os.DirFS("/")
	}
	if l.statfs == nil {
		l.statfs = statfs
	}
	if l.exec == nil {
		l.exec = execCommand
	}
	if l.uname == nil {
		l.uname = unameMachine
	}
	if l.now == nil {
		l.now = time.Now
	}
	if l.sleep == nil {
		l.sleep = sleepCtx
	}
	return l
}

// Basic reports the device identity. Only meminfo and uptime are required;
// everything else degrades to "" (or "unknown" for Model and CPUArch) so a
// locked-down or non-Pi system still answers.
func (l *Linux) Basic(ctx context.Context) (Basic, error) {
	if err := ctx.Err(); err != nil {
		return Basic{}, err
	}
	mem, err := l.meminfo()
	if err != nil {
		return Basic{}, err
	}
	up, err := l.uptime()
	if err != nil {
		return Basic{}, err
	}
	cpu := l.cpuinfo()
	b := Basic{
		Hostname:         l.firstLine("proc/sys/kernel/hostname", "etc/hostname"),
		Model:            l.model(cpu),
		CPUArch:          "unknown",
		CPUCores:         l.cores(cpu),
		MemoryTotalBytes: mem.MemTotal,
		KernelVersion:    l.firstLine("proc/sys/kernel/osrelease"),
		UptimeSeconds:    uint64(up),
		Serial:           knownID(cpu.Serial),
		Revision:         knownID(cpu.Revision),
	}
	if m, err := l.uname(); err == nil && m != "" {
		b.CPUArch = m
	}
	if b.Serial == "" {
		b.Serial = knownID(l.deviceTreeString("serial-number"))
	}
	if b.Revision == "" {
		b.Revision = l.deviceTreeRevision()
	}
	osr := l.osRelease()
	b.OSName = cmp.Or(osr["NAME"], osr["PRETTY_NAME"])
	b.OSVersion = cmp.Or(osr["VERSION"], osr["VERSION_ID"], osr["VERSION_CODENAME"])
	return b, nil
}

// Health takes a snapshot. It fails only when the core /proc files or
// statfs of "/" fail; temperature, frequency and throttle are optional.
func (l *Linux) Health(ctx context.Context) (Health, error) {
	if err := ctx.Err(); err != nil {
		return Health{}, err
	}
	cpu, err := l.cpuUsage(ctx)
	if err != nil {
		return Health{}, err
	}
	mem, err := l.meminfo()
	if err != nil {
		return Health{}, err
	}
	load, err := l.loadavg()
	if err != nil {
		return Health{}, err
	}
	up, err := l.uptime()
	if err != nil {
		return Health{}, err
	}
	total, free, err := l.statfs("/")
	if err != nil {
		return Health{}, fmt.Errorf("sysinfo: statfs %q: %w", "/", err)
	}
	h := Health{
		CPUUsagePercent:      cpu,
		CPUFreqMHz:           l.cpuFreqMHz(),
		Load1:                load.Load1,
		Load5:                load.Load5,
		Load15:               load.Load15,
		MemoryTotalBytes:     mem.MemTotal,
		MemoryUsedBytes:      mem.Used(),
		MemoryAvailableBytes: mem.Available(),
		SwapTotalBytes:       mem.SwapTotal,
		SwapUsedBytes:        mem.SwapUsed(),
		DiskTotalBytes:       total,
		DiskUsedBytes:        subSat(total, free),
		UptimeSeconds:        uint64(up),
	}
	h.TemperatureCelsius, h.TemperatureSource = l.temperature(ctx)
	h.Throttle = l.throttle(ctx)
	h.Time = l.now()
	return h, nil
}

// Hardware lists what the device has. Missing subsystems are empty lists,
// not errors: most machines lack most of them.
func (l *Linux) Hardware(ctx context.Context) (Hardware, error) {
	if err := ctx.Err(); err != nil {
		return Hardware{}, err
	}
	chips, labels := l.gpioChips()
	temp, _ := l.temperature(ctx)
	thr, thrSrc := l.throttle(ctx), ThrottleNone
	if thr != nil {
		thrSrc = thr.Source
	}
	return Hardware{
		GPIOChips:      chips,
		GPIOChipLabels: labels,
		I2CBuses:       l.i2cBuses(),
		PWMChips:       l.numbered("sys/class/pwm", "pwmchip"),
		Cameras:        l.cameras(),
		Thermal:        temp != nil,
		Throttle:       thr != nil,
		ThrottleSource: thrSrc,
		IsRaspberryPi:  isRaspberryPi(l.model(l.cpuinfo())),
	}, nil
}

// Counters reads the cumulative network and disk counters for [Rates].
//
// Interfaces are those of /proc/net/dev except loopback. Disks are the
// /proc/diskstats devices listed in sys/block, which holds whole devices
// only (partitions live below them); when sys/block is missing or empty, as
// in some containers, kernel partition names (sda1, mmcblk0p1, nvme0n1p1)
// are left out instead. Either way these are not disks: ram* and zram*
// (memory; zram is usually swap), loop* (file images, one per snap on
// Ubuntu, whose I/O already shows on the disk holding the file) and an
// eMMC's mmcblkNbootM and mmcblkNrpmb areas, which the OS does not use.
// Device-mapper (dm-*) and md RAID (md*) devices are disks although their
// I/O also shows on the devices below them: on an encrypted or RAID root
// they are the volume the user thinks of, and rates are per device, never
// summed. Optical drives (sr*) and nbd* are disks too.
func (l *Linux) Counters(ctx context.Context) (Counters, error) {
	if err := ctx.Err(); err != nil {
		return Counters{}, err
	}
	nb, err := l.read("proc/net/dev")
	if err != nil {
		return Counters{}, err
	}
	db, err := l.read("proc/diskstats")
	if err != nil {
		return Counters{}, err
	}
	// One timestamp for both files: they are read microseconds apart, and
	// Rates needs a single interval per pair.
	now := l.now()
	ifs, err := ParseNetDev(nb)
	if err != nil {
		return Counters{}, err
	}
	disks, err := ParseDiskstats(db)
	if err != nil {
		return Counters{}, err
	}
	ifs = slices.DeleteFunc(ifs, func(c NetCounters) bool { return c.Name == "lo" })
	sort.Slice(ifs, func(i, j int) bool { return naturalCompare(ifs[i].Name, ifs[j].Name) < 0 })
	sysBlock := l.sysBlock()
	disks = slices.DeleteFunc(disks, func(d DiskCounters) bool { return !isWholeDisk(d.Name, sysBlock) })
	sort.Slice(disks, func(i, j int) bool { return naturalCompare(disks[i].Name, disks[j].Name) < 0 })
	return Counters{Time: now, Net: ifs, Disk: disks}, nil
}

// sysBlock is the set of names in sys/block, or nil when it cannot be read
// or is empty, which means "no sysfs" rather than "no disks".
func (l *Linux) sysBlock() map[string]bool {
	entries, err := fs.ReadDir(l.root, "sys/block")
	if err != nil || len(entries) == 0 {
		return nil
	}
	m := make(map[string]bool, len(entries))
	for _, e := range entries {
		m[e.Name()] = true
	}
	return m
}

// cpuUsage returns usage since the previous reading when that is 100 ms to
// 60 s old, else samples over 100 ms. The lock is not held while sleeping,
// so a cancelled caller never waits behind another one.
func (l *Linux) cpuUsage(ctx context.Context) (float64, error) {
	l.mu.Lock()
	prev, prevAt, ok := l.prev, l.prevAt, l.hasPrev
	l.mu.Unlock()

	age := l.now().Sub(prevAt)
	if !ok || age < 0 || age > cpuSampleMax {
		var err error
		if prev, err = l.readStat(); err != nil {
			return 0, err
		}
		age = 0
	}
	for attempt := 0; ; attempt++ {
		if age < cpuSampleMin {
			// A previous reading younger than the window only needs
			// the rest of the window, not a full fresh one.
			if err := l.sleep(ctx, cpuSampleMin-age); err != nil {
				return 0, fmt.Errorf("sysinfo: sample /proc/stat: %w", err)
			}
		}
		cur, err := l.readStat()
		if err != nil {
			return 0, err
		}
		curAt := l.now()
		pct, ok := CPUUsagePercent(prev, cur)
		if !ok && attempt == 0 {
			// Counters went backwards: the old reading is from
			// another boot (or fixture). Start afresh from this one.
			prev, age = cur, 0
			continue
		}
		l.mu.Lock()
		// Concurrent callers finish in any order; keep the newest reading
		// so a slow caller does not hand the next one an older baseline.
		if !l.hasPrev || !curAt.Before(l.prevAt) {
			l.prev, l.prevAt, l.hasPrev = cur, curAt, true
		}
		l.mu.Unlock()
		return pct, nil
	}
}

func (l *Linux) readStat() (CPUTimes, error) {
	return parseFile(l, "proc/stat", ParseStat)
}

func (l *Linux) meminfo() (Meminfo, error) {
	return parseFile(l, "proc/meminfo", ParseMeminfo)
}

func (l *Linux) loadavg() (Loadavg, error) {
	return parseFile(l, "proc/loadavg", ParseLoadavg)
}

func (l *Linux) uptime() (float64, error) {
	return parseFile(l, "proc/uptime", ParseUptime)
}

// cpuinfo is optional (some containers hide it), so errors read as empty.
func (l *Linux) cpuinfo() CPUInfo {
	b, err := l.read("proc/cpuinfo")
	if err != nil {
		return CPUInfo{}
	}
	c, _ := ParseCPUInfo(b)
	return c
}

// cores prefers cpuinfo, then the online cpu list, and never says 0.
func (l *Linux) cores(c CPUInfo) int {
	if c.Cores > 0 {
		return c.Cores
	}
	if s, ok := l.readTrim("sys/devices/system/cpu/online"); ok {
		if n, err := parseCPUList(s); err == nil && n > 0 {
			return n
		}
	}
	return 1
}

// model follows the chain device tree, cpuinfo Model, DMI, "unknown".
func (l *Linux) model(c CPUInfo) string {
	if m := l.deviceTreeString("model"); m != "" {
		return m
	}
	if c.Model != "" {
		return c.Model
	}
	if m, ok := l.readTrim("sys/class/dmi/id/product_name"); ok && m != "" {
		return m
	}
	return "unknown"
}

// deviceTreeString reads a device-tree string property, which is
// NUL-terminated. proc/device-tree is normally a symlink to the sysfs path,
// but either may be missing in containers.
func (l *Linux) deviceTreeString(prop string) string {
	for _, dir := range []string{"proc/device-tree", "sys/firmware/devicetree/base"} {
		b, err := fs.ReadFile(l.root, path.Join(dir, prop))
		if err != nil {
			continue
		}
		s, _, _ := strings.Cut(string(b), "\x00")
		if s = strings.TrimSpace(s); s != "" {
			return s
		}
	}
	return ""
}

// deviceTreeRevision reads the board revision code the firmware puts in
// system/linux,revision: one 32-bit big-endian cell. Kernels that do not
// print Revision in /proc/cpuinfo (arm64) or print zeros (Debian's 32-bit
// ones) still have it when the firmware booted them. "" when absent.
func (l *Linux) deviceTreeRevision() string {
	for _, dir := range []string{"proc/device-tree", "sys/firmware/devicetree/base"} {
		b, err := fs.ReadFile(l.root, path.Join(dir, "system/linux,revision"))
		if err != nil || len(b) != 4 {
			continue
		}
		if v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]); v != 0 {
			return fmt.Sprintf("%04x", v) // as the Pi kernel prints it in cpuinfo
		}
	}
	return ""
}

// knownID is a serial number or revision code, or "" when it is all zeros:
// kernels that do not know the board (Debian's 32-bit ones, an emulator)
// print 0000 and 0000000000000000, which identify nothing.
func knownID(s string) string {
	if strings.Trim(s, "0") == "" {
		return ""
	}
	return s
}

func (l *Linux) osRelease() map[string]string {
	for _, p := range []string{"etc/os-release", "usr/lib/os-release"} {
		if b, err := fs.ReadFile(l.root, p); err == nil {
			m, _ := ParseOSRelease(b) // keep what parsed; one odd line should not blank the OS name
			return m
		}
	}
	return nil
}

func (l *Linux) cpuFreqMHz() *float64 {
	s, ok := l.readTrim("sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq")
	if !ok {
		return nil
	}
	khz, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return nil
	}
	mhz := float64(khz) / 1000
	return &mhz
}

// temperature walks thermal_zone0, vcgencmd, then hwmon. It never fails:
// no reading is a valid answer on VMs and many laptops.
func (l *Linux) temperature(ctx context.Context) (*float64, string) {
	if s, ok := l.readTrim("sys/class/thermal/thermal_zone0/temp"); ok {
		if c, err := parseMilliCelsius(s); err == nil {
			return &c, "thermal_zone0"
		}
	}
	if out, err := l.vcgencmd(ctx, "measure_temp"); err == nil {
		if c, err := ParseVcgencmdTemp(string(out)); err == nil {
			return &c, "vcgencmd"
		}
	}
	l.find.Do(l.discover)
	for _, in := range l.hwmon {
		s, ok := l.readTrim(in.file)
		if !ok {
			continue
		}
		if c, err := parseMilliCelsius(s); err == nil {
			return &c, in.source
		}
	}
	return nil, ""
}

// discover finds the optional sources: the firmware throttle nodes, the
// rpi_volt under-voltage alarm and the hwmon temperature inputs (each with
// its source name, read once).
func (l *Linux) discover() {
	l.throttles, _ = fs.Glob(l.root, "sys/devices/platform/soc*/*firmware/get_throttled")
	slices.Sort(l.throttles)
	for _, h := range l.globNames("sys/class/hwmon", "hwmon*") {
		dir := path.Join("sys/class/hwmon", h)
		name, ok := l.readTrim(path.Join(dir, "name"))
		if !ok || name == "" {
			name = h
		}
		if alarm := path.Join(dir, "in0_lcrit_alarm"); name == "rpi_volt" && l.rpiVolt == "" {
			if _, err := fs.Stat(l.root, alarm); err == nil {
				l.rpiVolt = alarm
			}
		}
		for _, in := range l.globNames(dir, "temp*_input") {
			l.hwmon = append(l.hwmon, hwmonIn{path.Join(dir, in), "hwmon:" + name + "/" + strings.TrimSuffix(in, "_input")})
		}
	}
}

// vcgencmd runs the firmware tool, and after it was once not found does
// not look for it again.
func (l *Linux) vcgencmd(ctx context.Context, args ...string) ([]byte, error) {
	if l.noVcgencmd.Load() {
		return nil, fmt.Errorf("sysinfo: run vcgencmd: %w", exec.ErrNotFound)
	}
	out, err := l.exec(ctx, "vcgencmd", args...)
	if errors.Is(err, exec.ErrNotFound) {
		l.noVcgencmd.Store(true)
	}
	return out, err
}

// throttle tries every source a kernel may offer, the complete ones first:
// the firmware's get_throttled node (under soc/soc:firmware on Pi 1-4 and
// soc@107c000000/soc@107c000000:firmware on Pi 5, hence the glob), then
// vcgencmd, then the rpi_volt hwmon alarm, which Debian's 32-bit Pi kernel
// has without the node and which tells under-voltage now and nothing else.
// nil means no source: the state is unknown.
func (l *Linux) throttle(ctx context.Context) *Throttle {
	l.find.Do(l.discover)
	for _, p := range l.throttles {
		s, ok := l.readTrim(p)
		if !ok {
			continue
		}
		if t, err := ParseThrottled(s); err == nil {
			t.Source = ThrottleFirmware
			return &t
		}
	}
	if out, err := l.vcgencmd(ctx, "get_throttled"); err == nil {
		if t, err := ParseThrottled(string(out)); err == nil {
			t.Source = ThrottleVcgencmd
			return &t
		}
	}
	if l.rpiVolt != "" {
		if s, ok := l.readTrim(l.rpiVolt); ok && (s == "0" || s == "1") {
			t := ThrottleFromRaw(0)
			if s == "1" {
				t = ThrottleFromRaw(1)
			}
			t.Source, t.UnderVoltageOnly = ThrottleRpiVolt, true
			return &t
		}
	}
	return nil
}

// gpioChips lists /dev/gpiochipN names from sys/bus/gpio and attributes
// labels from the legacy sys/class/gpio/gpiochip<base> nodes. A legacy node
// and its chardev chip share a parent device, so device/gpiochip* names the
// chip; when a parent has several chips (gpio-brcmstb on the Pi 5 has one
// per bank) the label is ambiguous and left out.
func (l *Linux) gpioChips() ([]string, map[string]string) {
	names := l.numbered("sys/bus/gpio/devices", "gpiochip")
	labels := make(map[string]string)
	for _, legacy := range l.globNames("sys/class/gpio", "gpiochip*") {
		dir := path.Join("sys/class/gpio", legacy)
		devs := l.numbered(path.Join(dir, "device"), "gpiochip")
		if len(devs) != 1 {
			continue
		}
		if !slices.Contains(names, devs[0]) {
			names = append(names, devs[0]) // no sys/bus/gpio: trust the legacy link
		}
		if label, ok := l.readTrim(path.Join(dir, "label")); ok && label != "" {
			labels[devs[0]] = label
		}
	}
	slices.SortFunc(names, naturalCompare)
	return names, labels
}

// i2cBuses prefers i2c-dev (buses that have a /dev node) and falls back to
// the adapters on the i2c bus when the i2c-dev module is not loaded.
func (l *Linux) i2cBuses() []int {
	for _, dir := range []string{"sys/class/i2c-dev", "sys/bus/i2c/devices"} {
		var buses []int
		for _, name := range l.globNames(dir, "i2c-*") {
			if n, err := strconv.Atoi(strings.TrimPrefix(name, "i2c-")); err == nil && n >= 0 {
				buses = append(buses, n)
			}
		}
		if len(buses) > 0 {
			slices.Sort(buses)
			return buses
		}
	}
	return []int{}
}

// cameras reports image sensors (v4l sub-devices named after a sensor
// driver, e.g. "imx708 10-001a") and UVC devices (by their product name).
// Codec, ISP and CSI-receiver nodes are not cameras and are skipped.
func (l *Linux) cameras() []string {
	const dir = "sys/class/video4linux"
	var cams []string
	for _, node := range l.globNames(dir, "*") {
		name, ok := l.readTrim(path.Join(dir, node, "name"))
		if !ok || name == "" {
			continue
		}
		switch {
		case strings.HasPrefix(node, "v4l-subdev"):
			if driver, _, _ := strings.Cut(name, " "); isSensorDriver(driver) {
				cams = append(cams, driver)
			}
		case strings.HasPrefix(node, "video"):
			ue, _ := fs.ReadFile(l.root, path.Join(dir, node, "device/uevent"))
			if slices.Contains(strings.Fields(string(ue)), "DRIVER=uvcvideo") ||
				strings.HasPrefix(name, "mmal service") { // legacy bcm2835-v4l2 camera stack
				cams = append(cams, name)
			}
		}
	}
	if cams == nil {
		return []string{}
	}
	slices.Sort(cams)
	return slices.Compact(cams)
}

// isSensorDriver recognises camera sensor drivers by their name prefix. A
// prefix list is crude, but it is what tells a sensor from the lens motors
// (dw9807) and bridges on the same camera I2C bus.
func isSensorDriver(d string) bool {
	for _, p := range []string{"imx", "ov", "ox", "os0", "ar0", "gc", "hm", "s5k", "vd5", "irs", "mira", "arducam"} {
		if len(d) > len(p) && strings.HasPrefix(d, p) {
			return true
		}
	}
	return false
}

// numbered lists entries of dir named prefix+N, sorted by N, never nil.
func (l *Linux) numbered(dir, prefix string) []string {
	out := []string{}
	for _, name := range l.globNames(dir, prefix+"*") {
		if n, err := strconv.Atoi(strings.TrimPrefix(name, prefix)); err == nil && n >= 0 {
			out = append(out, name)
		}
	}
	slices.SortFunc(out, naturalCompare)
	return out
}

// globNames returns the base names in dir matching pattern, sorted
// naturally (hwmon2 before hwmon10). A missing dir is simply empty.
func (l *Linux) globNames(dir, pattern string) []string {
	matches, _ := fs.Glob(l.root, path.Join(dir, pattern))
	names := make([]string, len(matches))
	for i, m := range matches {
		names[i] = path.Base(m)
	}
	slices.SortFunc(names, naturalCompare)
	return names
}

// parseFile reads name into a reused buffer and parses it; parse must not
// keep the bytes.
func parseFile[T any](l *Linux, name string, parse func([]byte) (T, error)) (T, error) {
	bp, _ := l.bufs.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	defer l.bufs.Put(bp)
	b, err := l.readInto(name, (*bp)[:0])
	*bp = b
	if err != nil {
		var zero T
		return zero, err
	}
	return parse(b)
}

// readInto appends the whole of name to b. proc and sys files report no
// size, so it reads until EOF.
func (l *Linux) readInto(name string, b []byte) ([]byte, error) {
	f, err := l.root.Open(name)
	if err != nil {
		return b, fmt.Errorf("sysinfo: %w", err)
	}
	defer f.Close()
	if cap(b) == 0 {
		b = make([]byte, 0, 4096)
	}
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := f.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, fmt.Errorf("sysinfo: %s: %w", name, err)
		}
	}
}

// read is fs.ReadFile with the package prefix on errors.
func (l *Linux) read(name string) ([]byte, error) {
	b, err := fs.ReadFile(l.root, name)
	if err != nil {
		return nil, fmt.Errorf("sysinfo: %w", err)
	}
	return b, nil
}

// readTrim reads a one-value sysfs/procfs file.
func (l *Linux) readTrim(name string) (string, bool) {
	s, err := parseFile(l, name, func(b []byte) (string, error) { return string(bytes.TrimSpace(b)), nil })
	return s, err == nil
}

// firstLine returns the first non-empty of the given one-line files.
func (l *Linux) firstLine(names ...string) string {
	for _, n := range names {
		if s, ok := l.readTrim(n); ok && s != "" {
			return s
		}
	}
	return ""
}

// naturalCompare orders strings with embedded numbers by value, so that
// "gpiochip2" < "gpiochip10" and "temp2_input" < "temp10_input".
func naturalCompare(a, b string) int {
	for a != "" && b != "" {
		da, db := isDigit(a[0]), isDigit(b[0])
		if da && db {
			na, ra := splitDigits(a)
			nb, rb := splitDigits(b)
			ta, tb := strings.TrimLeft(na, "0"), strings.TrimLeft(nb, "0")
			if c := cmp.Compare(len(ta), len(tb)); c != 0 {
				return c
			}
			if c := strings.Compare(ta, tb); c != 0 {
				return c
			}
			if c := cmp.Compare(len(na), len(nb)); c != 0 {
				return c
			}
			a, b = ra, rb
			continue
		}
		if a[0] != b[0] {
			return cmp.Compare(a[0], b[0])
		}
		a, b = a[1:], b[1:]
	}
	return cmp.Compare(len(a), len(b))
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func splitDigits(s string) (digits, rest string) {
	i := 0
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return s[:i], s[i:]
}

// sleepCtx waits for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// execCommand runs a helper such as vcgencmd. systemd services often have a
// minimal PATH, so /usr/bin is tried too; a missing binary wraps
// exec.ErrNotFound, which callers treat as "source absent".
func execCommand(ctx context.Context, name string, args ...string) ([]byte, error) {
	bin, err := exec.LookPath(name)
	if err != nil {
		alt := filepath.Join("/usr/bin", name)
		st, serr := os.Stat(alt)
		if serr != nil || !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
			return nil, fmt.Errorf("sysinfo: run %s: %w", name, exec.ErrNotFound)
		}
		bin = alt
	}
	ctx, cancel := context.WithTimeout(ctx, execTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && len(ee.Stderr) > 0 {
			return nil, fmt.Errorf("sysinfo: run %s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(ee.Stderr)))
		}
		return nil, fmt.Errorf("sysinfo: run %s %s: %w", name, strings.Join(args, " "), err)
	}
	return out, nil
}
