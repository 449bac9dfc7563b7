package journal

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestArgs(t *testing.T) {
	base := []string{"-o", "json", "--no-pager", "-r", "--all", "--output-fields=MESSAGE,PRIORITY,_SYSTEMD_UNIT,UNIT,SYSLOG_IDENTIFIER,_PID"}
	since := time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC) // 1767323045.0000006
	for _, tc := range []struct {
		name string
		q    Query
		want []string
	}{
		{"zero", Query{}, append(slices.Clone(base), "-n", "100", "-p", "0")},
		{"no priority filter", Query{Priority: -1}, append(slices.Clone(base), "-n", "100")},
		{"priority 8 is no filter", Query{Priority: 8, Limit: 5}, append(slices.Clone(base), "-n", "5")},
		{"grep reads until enough match", Query{Priority: -1, Grep: "error", Limit: 5}, slices.Clone(base)},
		{"units and priority", Query{Units: []string{"nginx.service", "ssh*"}, Priority: 3},
			append(slices.Clone(base), "-n", "100", "-u", "nginx.service", "-u", "ssh*", "-p", "3")},
		{"times widen to whole seconds", Query{Priority: -1, Since: since, Until: since.Add(time.Hour)},
			append(slices.Clone(base), "-n", "100", "--since", "@1767323045", "--until", "@1767326646")},
		{"whole-second until stays", Query{Priority: -1, Until: time.Unix(1767326645, 0)},
			append(slices.Clone(base), "-n", "100", "--until", "@1767326645")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Args(tc.q); !slices.Equal(got, tc.want) {
				t.Errorf("Args(%+v)\n got %q\nwant %q", tc.q, got, tc.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	ok := []Query{
		{},
		{Units: []string{"nginx", "nginx.service", "getty@tty1.service", "ssh*", "a?c", "[ab]x", "systemd-fsck@dev-disk-by\\x2dlabel-root.service", "x:y_z"}},
		{Grep: strings.Repeat("é", MaxGrep), Limit: MaxLimit},
		{Units: make16("u")},
		{Since: time.Unix(1, 0), Until: time.Unix(1, 0)},
	}
	for _, q := range ok {
		if err := q.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v", q, err)
		}
	}
	bad := map[string]Query{
		"starts with dash":  {Units: []string{"-f"}},
		"option smuggled":   {Units: []string{"--output=cat"}},
		"empty unit":        {Units: []string{""}},
		"space":             {Units: []string{"nginx service"}},
		"slash":             {Units: []string{"../etc"}},
		"semicolon":         {Units: []string{"a;b"}},
		"newline":           {Units: []string{"a\nb"}},
		"unit too long":     {Units: []string{strings.Repeat("a", 257)}},
		"17 units":          {Units: append(make16("u"), "x")},
		"grep too long":     {Grep: strings.Repeat("a", MaxGrep+1)},
		"grep not utf8":     {Grep: "\xff"},
		"limit":             {Limit: MaxLimit + 1},
		"since after until": {Since: time.Unix(2, 0), Until: time.Unix(1, 0)},
	}
	for name, q := range bad {
		err := q.Validate()
		if err == nil || !strings.HasPrefix(err.Error(), "journal: ") {
			t.Errorf("%s: Validate = %v; want a journal: error", name, err)
		}
	}
}

func make16(prefix string) []string {
	var out []string
	for i := range MaxUnits {
		out = append(out, prefix+string(rune('a'+i)))
	}
	return out
}

func TestLevel(t *testing.T) {
	want := []string{"emerg", "alert", "crit", "err", "warning", "notice", "info", "debug"}
	for p, w := range want {
		if got := Level(p); got != w {
			t.Errorf("Level(%d) = %q, want %q", p, got, w)
		}
	}
	if Level(9) != "9" || Level(-1) != "-1" {
		t.Error("out-of-range levels")
	}
}

func TestMatchUnit(t *testing.T) {
	for _, tc := range []struct {
		patterns []string
		unit     string
		want     bool
	}{
		{nil, "anything", true},
		{[]string{"nginx"}, "nginx.service", true},
		{[]string{"nginx.service"}, "nginx.service", true},
		{[]string{"nginx"}, "nginx-extra.service", false},
		{[]string{"ngin*"}, "nginx.service", true},
		{[]string{"*.socket"}, "nginx.service", false},
		{[]string{"ssh.socket"}, "ssh.socket", true},
		{[]string{"ssh"}, "ssh.socket", false},
		{[]string{"a", "b"}, "b.service", true},
		{[]string{"foo.bar"}, "foo.bar.service", true},
		{[]string{"nginx"}, "", false},
	} {
		if got := MatchUnit(tc.patterns, tc.unit); got != tc.want {
			t.Errorf("MatchUnit(%q, %q) = %v", tc.patterns, tc.unit, got)
		}
	}
}

func TestStatic(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	entries := []Entry{ // deliberately out of order
		{Time: t0.Add(3 * time.Second), Unit: "nginx.service", Priority: 3, Message: "nginx: bind() failed"},
		{Time: t0, Unit: "nginx.service", Priority: 6, Message: "Started nginx.service"},
		{Time: t0.Add(time.Second), Unit: "ssh.service", Priority: 6, Message: "Accepted publickey for pi"},
		{Time: t0.Add(2 * time.Second), Unit: "motion.service", Priority: 7, Message: "bad \xff byte " + strings.Repeat("z", 5000)},
	}
	calls := 0
	s := Static{Entries: func() []Entry { calls++; return entries }}
	ctx := context.Background()

	res, err := s.Query(ctx, Query{Priority: -1})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Entries) != 4 || !res.Entries[0].Time.Equal(t0) || res.Entries[3].Priority != 3 || res.Entries[3].Level != "err" {
		t.Fatalf("all entries, oldest first: %+v", res.Entries)
	}
	if m := res.Entries[2].Message; !strings.HasPrefix(m, "bad \uFFFD byte zzz") || !strings.HasSuffix(m, "…") {
		t.Errorf("static messages are cleaned and capped like journalctl's: %.20q…", m)
	}
	if entries[3].Message[4] != 0xff {
		t.Error("Filter changed the caller's entries")
	}

	res, _ = s.Query(ctx, Query{Units: []string{"nginx"}, Priority: -1})
	if len(res.Entries) != 2 || res.Scanned != 2 {
		t.Errorf("unit filter: %+v", res)
	}
	res, _ = s.Query(ctx, Query{Priority: 3})
	if len(res.Entries) != 1 || res.Entries[0].Unit != "nginx.service" {
		t.Errorf("priority filter: %+v", res.Entries)
	}
	res, _ = s.Query(ctx, Query{Priority: -1, Grep: "PUBLICKEY"})
	if len(res.Entries) != 1 || res.Entries[0].Unit != "ssh.service" {
		t.Errorf("grep: %+v", res.Entries)
	}
	res, _ = s.Query(ctx, Query{Priority: -1, Limit: 1})
	if len(res.Entries) != 1 || res.Entries[0].Unit != "nginx.service" || res.Entries[0].Priority != 3 {
		t.Errorf("limit keeps the newest: %+v", res.Entries)
	}
	res, _ = s.Query(ctx, Query{Priority: -1, Since: t0.Add(time.Second), Until: t0.Add(2 * time.Second)})
	if len(res.Entries) != 2 {
		t.Errorf("since/until inclusive: %+v", res.Entries)
	}
	if _, err := s.Query(ctx, Query{Units: []string{"-x"}}); err == nil {
		t.Error("Static accepted an invalid query")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Query(cctx, Query{}); err == nil {
		t.Error("Static ignored a cancelled context")
	}
	if calls != 6 {
		t.Errorf("Entries called %d times, want once per valid query (6)", calls)
	}
	if res, err := (Static{}).Query(ctx, Query{}); err != nil || len(res.Entries) != 0 {
		t.Errorf("nil Entries: %+v, %v", res, err)
	}
}
