package selfupdate

import (
	"fmt"
	"strings"
)

// MaxVersion is the longest package version accepted: far above any real
// one, small enough to quote back in an error.
const MaxVersion = 64

// ValidVersion checks a Debian package version ([epoch:]upstream[-revision])
// with the characters dpkg allows. It also refuses a leading "-" and any
// space, so a version can never read as an option or a second argument of
// apt-get, to which it is passed as "raspi-mcp=VERSION".
func ValidVersion(v string) error {
	if v == "" || len(v) > MaxVersion {
		return fmt.Errorf("selfupdate: version %q: want 1 to %d characters", clip(v), MaxVersion)
	}
	epoch, rest := "", v
	if i := strings.IndexByte(v, ':'); i >= 0 {
		epoch, rest = v[:i], v[i+1:]
		if epoch == "" || strings.Trim(epoch, "0123456789") != "" {
			return fmt.Errorf("selfupdate: version %q: the epoch before ':' must be a number", clip(v))
		}
	}
	if rest == "" || rest[0] < '0' || rest[0] > '9' {
		return fmt.Errorf("selfupdate: version %q: the upstream version must start with a digit", clip(v))
	}
	for _, r := range rest {
		ok := r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || strings.ContainsRune(".+-~:", r)
		if !ok {
			return fmt.Errorf("selfupdate: version %q: character %q is not allowed in a Debian version", clip(v), r)
		}
	}
	if strings.HasSuffix(rest, "-") {
		return fmt.Errorf("selfupdate: version %q: empty Debian revision after '-'", clip(v))
	}
	return nil
}

func clip(s string) string {
	if len(s) > MaxVersion {
		return s[:MaxVersion] + "…"
	}
	return s
}

// Compare orders two valid Debian versions as dpkg does: epoch first (a
// missing one is 0), then the upstream version, then the revision, each
// compared as alternating runs of non-digits (where '~' sorts before
// everything, even the end of the string, and letters before other
// characters) and numbers. It returns -1, 0 or +1.
func Compare(a, b string) int {
	ea, ua, ra := split(a)
	eb, ub, rb := split(b)
	if c := compareNum(ea, eb); c != 0 {
		return c
	}
	if c := compareFragment(ua, ub); c != 0 {
		return c
	}
	return compareFragment(ra, rb)
}

func split(v string) (epoch, upstream, revision string) {
	epoch = "0"
	if i := strings.IndexByte(v, ':'); i >= 0 {
		epoch, v = v[:i], v[i+1:]
	}
	if i := strings.LastIndexByte(v, '-'); i >= 0 {
		return epoch, v[:i], v[i+1:]
	}
	return epoch, v, ""
}

// order is a character's weight in the non-digit part.
func order(c byte) int {
	switch {
	case c == '~':
		return -1
	case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		return int(c)
	}
	return int(c) + 256
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func compareFragment(a, b string) int {
	for a != "" || b != "" {
		// The non-digit run; an exhausted string weighs 0, between '~'
		// and everything else.
		for a != "" && !isDigit(a[0]) || b != "" && !isDigit(b[0]) {
			wa, wb := 0, 0
			if a != "" && !isDigit(a[0]) {
				wa, a = order(a[0]), a[1:]
			}
			if b != "" && !isDigit(b[0]) {
				wb, b = order(b[0]), b[1:]
			}
			if wa != wb {
				return sign(wa - wb)
			}
		}
		var na, nb string
		na, a = digits(a)
		nb, b = digits(b)
		if c := compareNum(na, nb); c != 0 {
			return c
		}
	}
	return 0
}

func digits(s string) (run, rest string) {
	i := 0
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return s[:i], s[i:]
}

// compareNum compares digit strings of any length without overflow.
func compareNum(a, b string) int {
	a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
	if len(a) != len(b) {
		return sign(len(a) - len(b))
	}
	return strings.Compare(a, b)
}

func sign(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}
