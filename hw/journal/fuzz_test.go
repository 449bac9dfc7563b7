package journal

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParse feeds arbitrary `journalctl -o json` output and query bounds to
// Parse. Nothing may panic and only a read error may fail it (a bytes
// reader has none). Whatever it returns keeps the query's promises: at most
// Limit entries, within the byte budget and the scan limit, at or below the
// priority, matching grep, with valid UTF-8 messages cut to MaxMessage and a
// known level name.
func FuzzParse(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte, grep string, priority, limit, maxBytes, scanLimit int) {
		// Keep the bounds small so the fuzzer reaches them.
		q := Query{Grep: grep, Priority: priority, Limit: limit % 50, MaxBytes: maxBytes % 8192, ScanLimit: scanLimit % 100}
		res, err := Parse(bytes.NewReader(data), q)
		if err != nil {
			t.Fatalf("Parse of an in-memory reader failed: %v", err)
		}
		if len(res.Entries) > limitOf(q) {
			t.Fatalf("%d entries for limit %d", len(res.Entries), limitOf(q))
		}
		if res.Scanned > scanLimitOf(q) {
			t.Fatalf("scanned %d past limit %d", res.Scanned, scanLimitOf(q))
		}
		if res.Skipped > res.Scanned {
			t.Fatalf("skipped %d of %d scanned", res.Skipped, res.Scanned)
		}
		spent := 0
		for _, e := range res.Entries {
			spent += len(e.Message) + len(e.Unit) + entryOverhead
			if !utf8.ValidString(e.Message) || !utf8.ValidString(e.Unit) || !utf8.ValidString(e.Identifier) {
				t.Fatalf("invalid UTF-8 in %+v", e)
			}
			if len(e.Message) > MaxMessage+len("…") {
				t.Fatalf("message of %d bytes", len(e.Message))
			}
			if e.Priority < 0 || e.Priority > 7 || e.Level == "" {
				t.Fatalf("priority %d level %q", e.Priority, e.Level)
			}
			if priority >= 0 && priority <= 7 && e.Priority > priority {
				t.Fatalf("priority %d passed filter %d", e.Priority, priority)
			}
			if grep != "" && !strings.HasSuffix(e.Message, "…") && !strings.Contains(strings.ToLower(e.Message), strings.ToLower(grep)) && isASCII(grep) {
				t.Fatalf("message %q does not contain %q", e.Message, grep)
			}
		}
		if spent > maxBytesOf(q) {
			t.Fatalf("%d bytes of entries past the %d budget", spent, maxBytesOf(q))
		}
	})
}
