package journal

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
)

// benchJournal is n lines shaped like trixie.jsonl's: journalctl's four
// cursor/time fields, seqnum, boot id and the six output fields, with
// messages of 30-200 bytes and every 50th a byte array.
func benchJournal(n int) []byte {
	var buf bytes.Buffer
	units := []string{"nginx.service", "ssh.service", "init.scope", "motion.service", "raspi-mcp.service"}
	for i := range n {
		t := int64(1795325967143238) - int64(i)*250000
		m := map[string]any{
			"__CURSOR":              fmt.Sprintf("s=6546ecf838594af9b312a0c66d353af2;i=%x;b=62944b4201c444d6829577f23e4849b0;m=%x;t=%x;x=%x", 100000-i, t/7, t, i*7919),
			"__REALTIME_TIMESTAMP":  strconv.FormatInt(t, 10),
			"__MONOTONIC_TIMESTAMP": strconv.FormatInt(t/7, 10),
			"__SEQNUM":              strconv.Itoa(100000 - i),
			"__SEQNUM_ID":           "6546ecf838594af9b312a0c66d353af2",
			"_BOOT_ID":              "62944b4201c444d6829577f23e4849b0",
			"PRIORITY":              strconv.Itoa(3 + i%5),
			"SYSLOG_IDENTIFIER":     "ident" + strconv.Itoa(i%7),
			"_PID":                  strconv.Itoa(200 + i%300),
			"_SYSTEMD_UNIT":         units[i%len(units)],
		}
		if units[i%len(units)] == "init.scope" {
			m["UNIT"] = units[(i/5)%len(units)]
		}
		msg := fmt.Sprintf("request %d from 192.168.1.%d: GET /api/v1/status HTTP/1.1 200 %s", i, i%250, bytes.Repeat([]byte("x"), i%150))
		if i%50 == 0 {
			m["MESSAGE"] = []int{98, 97, 100, 32, 255, 254, 32, 98, 121, 116, 101, 115}
		} else {
			m["MESSAGE"] = msg
		}
		line, _ := json.Marshal(m)
		buf.Write(line)
		buf.WriteByte('\n')
	}
	return buf.Bytes()
}

// BenchmarkParse reads 5000 lines (~2 MB) end to end with a grep that
// never matches (the worst case: every line decoded and searched), and the
// common case of the newest 100 without grep.
func BenchmarkParse(b *testing.B) {
	data := benchJournal(5000)
	for _, bc := range []struct {
		name string
		q    Query
	}{
		{"scan5000-grep-miss", Query{Priority: -1, Grep: "no such text"}},
		{"scan5000-grep-sparse", Query{Priority: -1, Grep: "from 192.168.1.7:", Limit: 1000, MaxBytes: 1 << 20}},
		{"newest100", Query{Priority: -1}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			res, err := Parse(bytes.NewReader(data), bc.q)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(data)))
			if res.Scanned < 100 {
				b.Fatalf("scanned %d", res.Scanned)
			}
			b.ReportMetric(float64(res.Scanned), "lines/op")
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := Parse(bytes.NewReader(data), bc.q); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
