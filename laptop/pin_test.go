package laptop

import (
	"bytes"
	"strings"
	"testing"
)

// Both spellings of a fingerprint people copy read as the same 32 bytes;
// anything else is refused with the form wanted.
func TestParseFingerprint(t *testing.T) {
	want := bytes.Repeat([]byte{0xab}, 32)
	hex := strings.Repeat("ab", 32)
	colons := strings.TrimSuffix(strings.Repeat("AB:", 32), ":")
	for _, s := range []string{"sha256:" + hex, "SHA256:" + strings.ToUpper(hex), colons, "sha256:" + colons,
		"sha256 Fingerprint=" + colons, " SHA256 Fingerprint=" + colons + "\n"} {
		got, err := ParseFingerprint(s)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%q: %x %v", s, got, err)
		}
	}
	for _, s := range []string{"", "sha256:", "sha256:" + hex[:62], "sha1:" + hex, "sha256:" + hex + "00", "A:BC" + colons[4:], "sha256:zz" + hex[2:]} {
		if _, err := ParseFingerprint(s); err == nil || !strings.Contains(err.Error(), "64 hex digits") {
			t.Errorf("%q accepted: %v", s, err)
		}
	}
	if got := FormatFingerprint(want); got != "sha256:"+hex {
		t.Errorf("format: %s", got)
	}
}
