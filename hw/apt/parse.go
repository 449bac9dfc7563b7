package apt

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ParseSimulate reads the output of apt-get -s (dist-upgrade, upgrade or
// install) with LANG=C:
//
//	Inst bash [5.2.15-2+b8] (5.2.15-2+b13 Debian:12.15/oldstable [amd64])
//	Inst cowsay (3.03+dfsg2-8 Debian:12.15/oldstable [all])
//	Remv zip [3.0-13]
//	The following packages have been kept back:
//	  linux-image-rpi-v8 raspi-firmware
//
// "Conf" lines repeat the "Inst" ones and are skipped. A line of a known
// kind that does not parse is an error: a plan that silently lost a
// package would not be the plan the person approved.
func ParseSimulate(out string) (Plan, error) {
	p := Plan{Upgrades: []Change{}, Installs: []Change{}, Removals: []Change{}, Held: []string{}}
	heldList := false
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if heldList {
			if strings.HasPrefix(line, "  ") {
				for _, n := range strings.Fields(line) {
					if err := ValidName(n); err != nil {
						return Plan{}, fmt.Errorf("apt: kept back: %w", err)
					}
					p.Held = append(p.Held, n)
				}
				continue
			}
			heldList = false
		}
		switch {
		case strings.HasPrefix(line, "The following packages have been kept back:"),
			strings.HasPrefix(line, "The following held packages will be changed:"):
			heldList = true
		case line == "Inst" || line == "Remv":
			return Plan{}, fmt.Errorf("apt: cannot read %q", line)
		case strings.HasPrefix(line, "Inst "):
			c, err := parseInst(line[len("Inst "):])
			if err != nil {
				return Plan{}, err
			}
			if c.From == "" {
				p.Installs = append(p.Installs, c)
			} else {
				p.Upgrades = append(p.Upgrades, c)
			}
		case strings.HasPrefix(line, "Remv "):
			f := strings.Fields(line[len("Remv "):])
			if len(f) == 0 || ValidName(f[0]) != nil {
				return Plan{}, fmt.Errorf("apt: cannot read %q", clip(line))
			}
			c := Change{Name: f[0]}
			if len(f) > 1 && strings.HasPrefix(f[1], "[") && strings.HasSuffix(f[1], "]") {
				c.From = strings.Trim(f[1], "[]")
			}
			p.Removals = append(p.Removals, c)
		}
	}
	if err := sc.Err(); err != nil {
		return Plan{}, fmt.Errorf("apt: read simulation: %w", err)
	}
	return p, p.Validate()
}

// parseInst reads what follows "Inst ": a name, the installed version in
// brackets (absent for a new package), and in parentheses the new
// version, its archives separated by ", " and the architecture.
func parseInst(s string) (Change, error) {
	bad := func() (Change, error) { return Change{}, fmt.Errorf("apt: cannot read \"Inst %s\"", clip(s)) }
	name, rest, ok := strings.Cut(s, " ")
	if !ok {
		return bad()
	}
	c := Change{Name: name}
	if strings.HasPrefix(rest, "[") {
		from, after, ok := strings.Cut(rest[1:], "] ")
		if !ok {
			return bad()
		}
		c.From, rest = from, after
	}
	if !strings.HasPrefix(rest, "(") {
		return bad()
	}
	inner, _, ok := strings.Cut(rest[1:], ")")
	if !ok {
		return bad()
	}
	ver, origins, ok := strings.Cut(inner, " ")
	if !ok {
		return bad()
	}
	c.To = ver
	if i := strings.LastIndex(origins, " ["); i >= 0 && strings.HasSuffix(origins, "]") {
		c.Arch = origins[i+2 : len(origins)-1]
		origins = origins[:i]
	}
	c.Origin = origins
	for _, o := range strings.Split(origins, ", ") {
		if isSecurity(o) {
			c.Security = true
		}
	}
	return c, nil
}

// isSecurity reports an archive "Origin:Version/Suite" that carries
// security fixes: Debian's and Raspberry Pi OS's are labelled
// Debian-Security, their suites end in -security.
func isSecurity(origin string) bool {
	label, suite, _ := strings.Cut(origin, "/")
	return strings.Contains(strings.ToLower(label), "security") || strings.HasSuffix(suite, "-security")
}

// ParsePolicy reads apt-cache policy for one package. A package apt does
// not know yields an empty Policy (apt-cache prints nothing for it).
//
//	raspi-mcp:
//	  Installed: 0.3.0
//	  Candidate: 0.4.0
//	  Version table:
//	     0.4.0 500
//	        500 file:/srv/apt stable/main arm64 Packages
//	 *** 0.3.0 100
//	        100 /var/lib/dpkg/status
func ParsePolicy(out string) (Policy, error) {
	var p Policy
	var current string // the version whose sources are being listed
	for _, line := range strings.Split(out, "\n") {
		t := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(t, "Installed:"):
			p.Installed = none(strings.TrimSpace(strings.TrimPrefix(t, "Installed:")))
		case strings.HasPrefix(t, "Candidate:"):
			p.Candidate = none(strings.TrimSpace(strings.TrimPrefix(t, "Candidate:")))
		case t == "Version table:" || t == "":
		case !strings.HasPrefix(line, " "):
			// the "name:" heading
		default:
			f := strings.Fields(strings.TrimPrefix(t, "*** "))
			switch {
			case len(f) == 2:
				current = f[0] // "0.4.0 500": a version and its priority
			case len(f) >= 3 && current != "" && current == p.Candidate:
				// "500 http://host/debian bookworm/main amd64 Packages";
				// "100 /var/lib/dpkg/status" is the installed copy, no suite.
				suite, _, _ := strings.Cut(f[2], "/")
				if !strings.HasPrefix(f[1], "/") && suite != "" {
					p.CandidateSuites = append(p.CandidateSuites, suite)
				}
			}
		}
	}
	for _, v := range []string{p.Installed, p.Candidate} {
		if v != "" {
			if err := ValidVersion(v); err != nil {
				return Policy{}, err
			}
		}
	}
	return p, nil
}

func none(v string) string {
	if v == "(none)" {
		return ""
	}
	return v
}

// Progress is how far a run has got, from apt's status descriptor
// (APT::Status-Fd):
//
//	dlstatus:1:9.09091:Retrieving file 1 of 11
//	pmstatus:dpkg-exec:0:Running dpkg
//	pmstatus:bash:20:Preparing bash (amd64)
//	pmerror:bash:20:trying to overwrite '/bin/x', which is also in package y
//	pmconffile:/etc/x:'/etc/x' '/etc/x.dpkg-new' 1 1
//
// Dpkg is set from the first pm line on: dpkg has been started and a
// cancel would leave packages half unpacked.
type Progress struct {
	Phase   string  // "", "download" or "install"
	Percent float64 // of the phase, 0..100
	Package string
	Message string
	Dpkg    bool
	Errors  []string // pmerror lines, "package: message"
}

// ParseStatus folds a status descriptor's lines into the latest progress.
// Lines of other kinds, and torn last lines, are skipped.
func ParseStatus(out string) Progress {
	var p Progress
	for _, line := range strings.Split(out, "\n") {
		kind, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		pkg, rest, ok1 := strings.Cut(rest, ":")
		pct, msg, ok2 := strings.Cut(rest, ":")
		switch kind {
		case "dlstatus", "pmstatus", "pmerror":
			if !ok1 || !ok2 {
				continue
			}
			f, err := strconv.ParseFloat(pct, 64)
			if err != nil || f < 0 || f > 100 {
				continue
			}
			if kind == "dlstatus" {
				if p.Dpkg {
					continue
				}
				p.Phase = "download"
			} else {
				p.Phase, p.Dpkg = "install", true
			}
			if kind == "pmerror" {
				p.Errors = append(p.Errors, pkg+": "+msg)
				continue
			}
			p.Percent, p.Package, p.Message = f, pkg, msg
		case "pmconffile":
			p.Phase, p.Dpkg = "install", true
		}
	}
	return p
}

// ParseLocks finds the holder of a lock in /proc/locks: lines such as
//
//	1: POSIX  ADVISORY  WRITE 4711 b3:02:262147 0 EOF
//
// where the third-to-last fields are the holder's pid and the locked
// file's device (major:minor, hex) and inode. It returns the pid, or 0
// when nobody holds that inode. OFD locks have pid -1 and are skipped.
func ParseLocks(out string, major, minor uint32, inode uint64) int {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		// "1:" "POSIX" "ADVISORY" "WRITE" pid dev:ino start end; a
		// blocked waiter has "->" after the number.
		if len(f) > 1 && f[1] == "->" {
			continue
		}
		if len(f) < 8 {
			continue
		}
		pid, err := strconv.Atoi(f[4])
		if err != nil || pid <= 0 {
			continue
		}
		parts := strings.Split(f[5], ":")
		if len(parts) != 3 {
			continue
		}
		ma, e1 := strconv.ParseUint(parts[0], 16, 32)
		mi, e2 := strconv.ParseUint(parts[1], 16, 32)
		ino, e3 := strconv.ParseUint(parts[2], 10, 64)
		if e1 == nil && e2 == nil && e3 == nil && uint32(ma) == major && uint32(mi) == minor && ino == inode {
			return pid
		}
	}
	return 0
}

// ParseConffiles reads dpkg.log for the configuration files dpkg decided
// on since a time:
//
//	2026-11-25 01:02:03 conffile /etc/x keep
//
// kept are the owner's files dpkg left in place (the new version is
// beside them as .dpkg-dist), replaced those it installed.
func ParseConffiles(log string, since time.Time) (kept, replaced []string) {
	kept, replaced = []string{}, []string{}
	for _, line := range strings.Split(log, "\n") {
		f := strings.Fields(line)
		if len(f) != 5 || f[2] != "conffile" {
			continue
		}
		at, err := time.ParseInLocation("2006-01-02 15:04:05", f[0]+" "+f[1], time.Local)
		if err != nil || at.Before(since.Truncate(time.Second)) {
			continue
		}
		switch f[4] {
		case "keep":
			kept = append(kept, f[3])
		case "install":
			replaced = append(replaced, f[3])
		}
	}
	return kept, replaced
}

// ParseShow reads apt-cache show stanzas for Package, Version, Size,
// Installed-Size (KiB), Release-Date and Release-Notes, keyed
// "name=version".
func ParseShow(out string) map[string]ShowEntry {
	m := map[string]ShowEntry{}
	var e ShowEntry
	flush := func() {
		if e.Package != "" && e.Version != "" {
			m[e.Package+"="+e.Version] = e
		}
		e = ShowEntry{}
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.TrimSpace(line) == "" {
			flush()
			continue
		}
		k, v, ok := strings.Cut(line, ": ")
		if !ok {
			continue
		}
		switch k {
		case "Package":
			e.Package = v
		case "Version":
			e.Version = v
		case "Size":
			e.Size, _ = strconv.ParseInt(v, 10, 64)
		case "Installed-Size":
			e.InstalledKiB, _ = strconv.ParseInt(v, 10, 64)
		case "Release-Date":
			e.ReleaseDate, _ = time.Parse(time.RFC3339, v)
		case "Release-Notes":
			if strings.HasPrefix(v, "https://") || strings.HasPrefix(v, "http://") {
				e.ReleaseNotes = v
			}
		}
	}
	flush()
	return m
}

// ShowEntry is one package version's sizes and, where raspi-mcp's own
// repository adds them (packaging/apt-repo), its publication date and
// release notes.
type ShowEntry struct {
	Package, Version string
	Size             int64 // bytes to download
	InstalledKiB     int64
	ReleaseDate      time.Time // Release-Date, RFC 3339; zero when absent
	ReleaseNotes     string    // Release-Notes, an http(s) URL; "" when absent
}

// CompareVersions orders two Debian versions as dpkg does: epoch, then
// upstream version and revision, each compared in runs of non-digits (with
// "~" before everything, even the end) and digits.
func CompareVersions(a, b string) int {
	ea, ua, ra := splitVersion(a)
	eb, ub, rb := splitVersion(b)
	if ea != eb {
		if ea < eb {
			return -1
		}
		return 1
	}
	if c := compareFragment(ua, ub); c != 0 {
		return c
	}
	return compareFragment(ra, rb)
}

func splitVersion(v string) (epoch int, upstream, revision string) {
	if e, rest, ok := strings.Cut(v, ":"); ok {
		epoch, _ = strconv.Atoi(e)
		v = rest
	}
	if i := strings.LastIndex(v, "-"); i >= 0 {
		return epoch, v[:i], v[i+1:]
	}
	return epoch, v, ""
}

// order is dpkg's weight of one character in a non-digit run.
func order(c byte) int {
	switch {
	case c == '~':
		return -1
	case '0' <= c && c <= '9':
		return 0
	case alnum(c):
		return int(c)
	}
	return int(c) + 256
}

func compareFragment(a, b string) int {
	for a != "" || b != "" {
		// Non-digit run.
		for (a != "" && !isDigit(a[0])) || (b != "" && !isDigit(b[0])) {
			var ca, cb int
			if a != "" && !isDigit(a[0]) {
				ca = order(a[0])
			}
			if b != "" && !isDigit(b[0]) {
				cb = order(b[0])
			}
			if ca != cb {
				if ca < cb {
					return -1
				}
				return 1
			}
			if a != "" && !isDigit(a[0]) {
				a = a[1:]
			}
			if b != "" && !isDigit(b[0]) {
				b = b[1:]
			}
		}
		// Digit run, compared as numbers.
		a = strings.TrimLeft(a, "0")
		b = strings.TrimLeft(b, "0")
		na, nb := digits(a), digits(b)
		if na != nb {
			if na < nb {
				return -1
			}
			return 1
		}
		if c := strings.Compare(a[:na], b[:nb]); c != 0 {
			return c
		}
		a, b = a[na:], b[nb:]
	}
	return 0
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func digits(s string) int {
	n := 0
	for n < len(s) && isDigit(s[n]) {
		n++
	}
	return n
}
