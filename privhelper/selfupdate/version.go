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
