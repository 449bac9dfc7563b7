package procs

import (
	"bufio"
	"cmp"
	"fmt"
	"io/fs"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// MaxFDs caps [Detail.OpenFiles] and, separately, [Detail.SocketInodes]: a
// server with thousands of descriptors must not produce a reply (or a
// readlink storm) of that size on a Pi Zero.
const MaxFDs = 256

// MaxMaps is how many entries [Detail.Maps] keeps: the largest by RSS.
const MaxMaps = 20

// Detail is the extra information of one process (spec ProcessDetail).
type Detail struct {
	Proc
	// Environment maps each variable to its value, with the values of
	// secret-looking keys replaced by [Redacted] and embedded passwords
	// hidden (see [RedactValue]). nil when not visible.
	Environment map[string]string
	OpenFiles   []OpenFile // non-socket descriptors of fd/, sorted by FD, at most MaxFDs (Truncated set beyond)
	// SocketInodes are the socket descriptors, for joining with
	// /proc/net/tcp and friends (see [InodeOwners]); at most MaxFDs.
	SocketInodes []SocketFD
	FDCount      int         // every descriptor in fd/, capped lists or not; 0 when fd/ is not visible
	IO           *IOCounters // /proc/PID/io; nil when not visible
	Maps         []MemoryMap // smaps aggregated per path, the MaxMaps largest by RSS
	MapsTotal    int         // distinct paths in smaps, before the MaxMaps cut
	CPUUser      float64     // seconds (UTime)
	CPUSystem    float64     // seconds (STime)
	Hidden       []string    // what could not be read and why, e.g. "environment: permission denied"
	Truncated    bool        // OpenFiles or SocketInodes hit MaxFDs
}

// OpenFile is one descriptor that is not a socket: a path, or the kernel's
// name of a pipe or anonymous inode ("pipe:[123]", "anon_inode:[eventfd]").
type OpenFile struct {
	FD   int
	Path string
	Mode string // "r", "w" or "rw" from fdinfo's flags (O_ACCMODE); "" when fdinfo is unreadable
}

// SocketFD is one socket descriptor and its inode.
type SocketFD struct {
	FD    int
	Inode uint64
}

// IOCounters are /proc/PID/io. ReadBytes and WriteBytes are what reached
// the storage layer; RChar and WChar count every read/write call, page
// cache and pipes included.
type IOCounters struct {
	ReadCount, WriteCount uint64 // syscr, syscw
	ReadBytes, WriteBytes uint64 // read_bytes, write_bytes
	RChar, WChar          uint64 // rchar, wchar
}

// MemoryMap is one path's mappings in smaps, added up. Anonymous mappings
// are "[anon]"; the kernel's own names ("[heap]", "[stack]") are kept.
type MemoryMap struct {
	Path      string
	RSS, Size uint64 // bytes
	// Perms is the union of the mappings' permissions: "r-xp" for a
	// library's code alone, "rwxp" for a library whose code, data and
	// read-only parts were added up; 's' when any mapping is shared.
	Perms string
}

// ReadDetail reads one process; an error wrapping fs.ErrNotExist when the
// PID is gone (or names a thread, not a process). Parts that cannot be read
// are left empty and named in Hidden.
func ReadDetail(fsys fs.FS, pid int, o Options) (Detail, error) {
	if pid <= 0 {
		return Detail{}, fmt.Errorf("procs: pid %d: not a process ID", pid)
	}
	r := newReader(fsys, o)
	var err error
	if r.boot, _, err = r.procStat(); err != nil {
		return Detail{}, err
	}
	r.loadUsers()
	var d Detail
	d.Proc, err = r.proc(pid, &d.Hidden)
	if err != nil {
		return Detail{}, err
	}
	hz := float64(r.o.hz())
	d.CPUUser, d.CPUSystem = float64(d.UTime)/hz, float64(d.STime)/hz
	dir := procDir(pid)

	if b, err := r.read(dir + "/environ"); err != nil {
		hide(&d.Hidden, "environment", err)
	} else {
		d.Environment = parseEnviron(b)
	}
	r.fds(dir, &d)
	if b, err := r.read(dir + "/io"); err != nil {
		hide(&d.Hidden, "io", err)
	} else {
		d.IO = parseIO(b)
	}
	if err := r.smaps(dir, &d); err != nil {
		hide(&d.Hidden, "memory maps", err)
	}
	return d, nil
}

// parseEnviron splits environ into a map, redacting as it goes. An entry
// without '=' (possible after a process rewrote its environment) is kept
// with an empty value.
func parseEnviron(b []byte) map[string]string {
	vars := splitNUL(b)
	env := make(map[string]string, len(vars))
	for _, kv := range vars {
		k, v, _ := strings.Cut(kv, "=")
		if k == "" {
			continue
		}
		env[k] = RedactValue(k, v)
	}
	return env
}

// fds lists fd/ in descriptor order, splitting sockets from the rest, and
// stops reading links once both lists are full.
func (r *reader) fds(dir string, d *Detail) {
	ents, err := fs.ReadDir(r.fsys, dir+"/fd")
	if err != nil {
		hide(&d.Hidden, "open files", err)
		return
	}
	fds := make([]int, 0, len(ents))
	for _, e := range ents {
		if fd, ok := atoi(e.Name()); ok {
			fds = append(fds, fd)
		}
	}
	slices.Sort(fds)
	d.FDCount = len(fds)
	for _, fd := range fds {
		if len(d.OpenFiles) >= MaxFDs && len(d.SocketInodes) >= MaxFDs {
			d.Truncated = true
			break
		}
		n := strconv.Itoa(fd)
		target, err := fs.ReadLink(r.fsys, dir+"/fd/"+n)
		if err != nil {
			continue // closed since the listing, or hidden: fd/ itself was visible
		}
		if ino, ok := socketInode(target); ok {
			if len(d.SocketInodes) < MaxFDs {
				d.SocketInodes = append(d.SocketInodes, SocketFD{FD: fd, Inode: ino})
			} else {
				d.Truncated = true
			}
			continue
		}
		if len(d.OpenFiles) >= MaxFDs {
			d.Truncated = true
			continue
		}
		d.OpenFiles = append(d.OpenFiles, OpenFile{FD: fd, Path: target, Mode: r.fdMode(dir + "/fdinfo/" + n)})
	}
}

// fdMode reads the access mode from fdinfo's "flags:" line (octal).
func (r *reader) fdMode(name string) string {
	b, err := r.read(name)
	if err != nil {
		return ""
	}
	for len(b) > 0 {
		var line []byte
		line, b = cutLine(b)
		if v, ok := cutPrefix(line, "flags:"); ok {
			flags, err := strconv.ParseUint(string(firstField(v)), 8, 64)
			if err != nil {
				return ""
			}
			switch flags & 3 { // O_ACCMODE
			case 0:
				return "r"
			case 1:
				return "w"
			case 2:
				return "rw"
			}
			return ""
		}
	}
	return ""
}

// socketInode parses the link target "socket:[12345]".
func socketInode(target string) (uint64, bool) {
	s, ok := strings.CutPrefix(target, "socket:[")
	if !ok {
		return 0, false
	}
	s, ok = strings.CutSuffix(s, "]")
	if !ok {
		return 0, false
	}
	return parseUint([]byte(s))
}

func parseIO(b []byte) *IOCounters {
	var c IOCounters
	for len(b) > 0 {
		var line []byte
		line, b = cutLine(b)
		k, v, ok := strings.Cut(string(line), ":")
		if !ok {
			continue
		}
		n, ok := parseUint([]byte(strings.TrimSpace(v)))
		if !ok {
			continue
		}
		switch k {
		case "rchar":
			c.RChar = n
		case "wchar":
			c.WChar = n
		case "syscr":
			c.ReadCount = n
		case "syscw":
			c.WriteCount = n
		case "read_bytes":
			c.ReadBytes = n
		case "write_bytes":
			c.WriteBytes = n
		}
	}
	return &c
}

// smaps adds up /proc/PID/smaps per path. It is streamed rather than read
// whole: a large process's smaps runs to megabytes.
func (r *reader) smaps(dir string, d *Detail) error {
	f, err := r.fsys.Open(dir + "/smaps")
	if err != nil {
		return err
	}
	defer f.Close()
	type agg struct {
		rss, size uint64
		perms     [4]byte
	}
	byPath := map[string]*agg{}
	var cur *agg
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Bytes()
		key, rest, isKey := cutKey(line)
		if !isKey {
			// A mapping header: address perms offset dev inode [path]. The
			// path is the rest of the line and may contain spaces.
			perms, path := mapHeader(line)
			if path == "" {
				path = "[anon]"
			}
			cur = byPath[path]
			if cur == nil {
				cur = &agg{perms: [4]byte{'-', '-', '-', 'p'}}
				byPath[path] = cur
			}
			for i, c := range perms {
				switch {
				case i < 3 && c != '-':
					cur.perms[i] = c
				case i == 3 && c == 's':
					cur.perms[3] = 's'
				}
			}
			continue
		}
		if cur == nil {
			continue
		}
		switch key {
		case "Rss":
			cur.rss += kB(rest)
		case "Size":
			cur.size += kB(rest)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	d.MapsTotal = len(byPath)
	maps := make([]MemoryMap, 0, len(byPath))
	for p, a := range byPath {
		maps = append(maps, MemoryMap{Path: p, RSS: a.rss, Size: a.size, Perms: string(a.perms[:])})
	}
	cmpElem := func(a, b MemoryMap) int {
		return cmp.Or(cmp.Compare(b.RSS, a.RSS), cmp.Compare(b.Size, a.Size), strings.Compare(a.Path, b.Path))
	}
	sort.Slice(maps, func(i, j int) bool { return cmpElem(maps[i], maps[j]) < 0 })
	if len(maps) > MaxMaps {
		maps = maps[:MaxMaps]
	}
	d.Maps = maps
	return nil
}

// cutKey recognises smaps' "Key:   value kB" lines: the first field ends
// with ':' (a header's first field is an address range).
func cutKey(line []byte) (key string, rest []byte, ok bool) {
	for i, c := range line {
		if c == ':' {
			return string(line[:i]), line[i+1:], true
		}
		if c == ' ' || c == '\t' {
			break
		}
	}
	return "", nil, false
}

// mapHeader returns the perms and path of a smaps/maps header line.
func mapHeader(line []byte) (perms []byte, path string) {
	rest := line
	for field := 0; field < 5; field++ {
		rest = trimSpace(rest)
		end := 0
		for end < len(rest) && !isSpace(rest[end]) {
			end++
		}
		if field == 1 {
			perms = rest[:end]
		}
		rest = rest[end:]
	}
	return perms, string(trimSpace(rest))
}

// kB parses "   1234 kB" to bytes.
func kB(b []byte) uint64 {
	n, _ := parseUint(firstField(b))
	return n * 1024
}

// InodeOwners maps socket inodes to the PID owning them, over every process
// whose fd/ is readable (all of them for root, one's own otherwise). A
// socket shared by several processes (a forking server's listener) maps to
// the lowest PID, normally the parent.
func InodeOwners(fsys fs.FS) (map[uint64]int, error) {
	pids, err := listPIDs(fsys)
	if err != nil {
		return nil, err
	}
	owners := map[uint64]int{}
	for _, pid := range pids {
		dir := procDir(pid) + "/fd"
		ents, err := fs.ReadDir(fsys, dir)
		if err != nil {
			continue // gone, or not ours to see
		}
		for _, e := range ents {
			target, err := fs.ReadLink(fsys, dir+"/"+e.Name())
			if err != nil {
				continue
			}
			if ino, ok := socketInode(target); ok {
				if _, seen := owners[ino]; !seen {
					owners[ino] = pid
				}
			}
		}
	}
	return owners, nil
}
