package units

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
)

// unitFile is a parsed unit file: for each section, each key's values in
// order. An empty assignment ("ExecStart=") clears the list so far, as in
// systemd, which is how drop-ins replace a setting; concatenating the
// fragment and its drop-ins before parsing therefore gives systemd's view.
type unitFile struct {
	sections map[string]map[string][]string
}

// parseUnitFile reads systemd's ini dialect: [Section] headers, Key=Value
// lines, '#' and ';' comments, and a trailing '\' continuing a line.
// Lines it cannot read are ignored, as systemd ignores them (with a
// warning that systemd-analyze verify reports).
func parseUnitFile(text string) unitFile {
	f := unitFile{sections: map[string]map[string][]string{}}
	var cur map[string][]string
	var pending string // a continued line being assembled
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if pending != "" && (strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";")) {
			continue // comments inside a continuation are dropped
		}
		if strings.HasSuffix(line, "\\") {
			pending += strings.TrimSpace(strings.TrimSuffix(line, "\\")) + " "
			continue
		}
		line, pending = pending+line, ""
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[' && line[len(line)-1] == ']':
			name := line[1 : len(line)-1]
			if f.sections[name] == nil {
				f.sections[name] = map[string][]string{}
			}
			cur = f.sections[name]
		case cur != nil:
			key, value, ok := strings.Cut(line, "=")
			if !ok {
				continue
			}
			key, value = strings.TrimSpace(key), strings.TrimSpace(value)
			if value == "" {
				cur[key] = []string{}
			} else {
				cur[key] = append(cur[key], value)
			}
		}
	}
	return f
}

func (f unitFile) has(section string) bool { _, ok := f.sections[section]; return ok }

// values returns every value of key in section.
func (f unitFile) values(section, key string) []string { return f.sections[section][key] }

// last returns the effective value of a single-valued key: the last one.
func (f unitFile) last(section, key string) string {
	v := f.sections[section][key]
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

// list returns the space-separated names of a list key (Requires=a b).
func (f unitFile) list(section, key string) []string {
	var out []string
	for _, v := range f.values(section, key) {
		out = append(out, strings.Fields(v)...)
	}
	return out
}

// execKeys are the command settings whose executables are checked.
func execKeys() []string {
	return []string{"ExecCondition", "ExecStartPre", "ExecStart", "ExecStartPost", "ExecReload", "ExecStop", "ExecStopPost"}
}

// defaultExecPath is where systemd looks up a command given without a
// path (systemd 239 and later).
const defaultExecPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// problem kinds, which the simulator turns into systemd's failure codes.
const (
	kindOther = iota
	kindExec
	kindUser
	kindGroup
	kindChdir
	kindDependency
)

type problem struct {
	kind  int
	error bool
	msg   string
}

// CheckUnitFile checks a service unit file's text (the fragment followed
// by its drop-ins) against the filesystem fsys, rooted at "/" (so
// "/usr/bin/x" is looked up as "usr/bin/x"). unitExists says whether a
// dependency is known to systemd; nil skips that check. Findings:
//
// Errors (the unit will not start, or not as written): no [Service]
// section; no ExecStart= (unless Type=oneshot); a command's executable
// missing, not a regular file or not executable (a warning instead when
// the command has the '-' prefix); User= or Group= not in /etc/passwd or
// /etc/group (names only: numeric ids, specifiers and DynamicUser=yes are
// not checked, nor NSS sources such as LDAP); WorkingDirectory= missing or
// not a directory (unless prefixed '-'); a Requires=, Requisite= or
// BindsTo= unit that does not exist.
//
// Warnings: no [Unit] section or Description=; no [Install] section with
// WantedBy=, RequiredBy=, UpheldBy=, Alias= or Also= ("static": CanEnable
// false); no Restart= (unless Type=oneshot); a Wants= unit that does not
// exist (systemd ignores it); files that cannot be read.
//
// Valid is true when there are no errors. FragmentPath is left to the
// caller.
func CheckUnitFile(fsys fs.FS, text string, unitExists func(name string) (bool, error)) Validation {
	v, _ := checkUnitFile(fsys, text, unitExists)
	return v
}

func checkUnitFile(fsys fs.FS, text string, unitExists func(name string) (bool, error)) (Validation, []problem) {
	f := parseUnitFile(text)
	var probs []problem
	add := func(kind int, isErr bool, format string, args ...any) {
		probs = append(probs, problem{kind: kind, error: isErr, msg: fmt.Sprintf(format, args...)})
	}
	v := Validation{}

	if !f.has("Unit") {
		add(kindOther, false, "no [Unit] section")
	}
	if !f.has("Service") {
		add(kindOther, true, "no [Service] section")
	}
	for _, k := range []string{"WantedBy", "RequiredBy", "UpheldBy", "Alias", "Also"} {
		if len(f.list("Install", k)) > 0 {
			v.CanEnable = true
		}
	}
	if !v.CanEnable {
		add(kindOther, false, "static: no [Install] section with WantedBy= (or RequiredBy=, Alias=, Also=), so it cannot be enabled; it runs only when another unit pulls it in")
	}
	if f.last("Unit", "Description") == "" {
		add(kindOther, false, "no Description=: listings will show only the unit name")
	}
	oneshot := f.last("Service", "Type") == "oneshot"
	if f.has("Service") && len(f.values("Service", "ExecStart")) == 0 && !oneshot {
		add(kindExec, true, "no ExecStart=: a service needs a command (only Type=oneshot may have none)")
	}
	if f.has("Service") && f.last("Service", "Restart") == "" && !oneshot {
		add(kindOther, false, "no Restart=: systemd will not restart it if it exits or crashes (Restart=on-failure is usual)")
	}

	for _, key := range execKeys() {
		for _, cmd := range f.values("Service", key) {
			if p, ok := checkExec(fsys, key, cmd); !ok {
				probs = append(probs, p)
			}
		}
	}

	dynamic := parseBool(f.last("Service", "DynamicUser"))
	if u := f.last("Service", "User"); u != "" && !dynamic && !skipName(u) {
		if found, err := inDatabase(fsys, "etc/passwd", u); err != nil {
			add(kindUser, false, "User=%s not checked: %v", u, err)
		} else if !found {
			add(kindUser, true, "User=%s does not exist (not in /etc/passwd)", u)
		}
	}
	if g := f.last("Service", "Group"); g != "" && !dynamic && !skipName(g) {
		if found, err := inDatabase(fsys, "etc/group", g); err != nil {
			add(kindGroup, false, "Group=%s not checked: %v", g, err)
		} else if !found {
			add(kindGroup, true, "Group=%s does not exist (not in /etc/group)", g)
		}
	}

	if wd := f.last("Service", "WorkingDirectory"); wd != "" {
		optional := strings.HasPrefix(wd, "-")
		dir := strings.TrimPrefix(wd, "-")
		if !strings.HasPrefix(dir, "~") && !strings.Contains(dir, "%") {
			info, err := fs.Stat(fsys, fsPath(dir))
			switch {
			case err == nil && !info.IsDir():
				add(kindChdir, true, "WorkingDirectory=%s is not a directory", dir)
			case errors.Is(err, fs.ErrNotExist):
				if !optional {
					add(kindChdir, true, "WorkingDirectory=%s does not exist", dir)
				}
			case err != nil:
				add(kindChdir, false, "WorkingDirectory=%s not checked: %v", dir, err)
			}
		}
	}

	if unitExists != nil {
		for _, dep := range []struct {
			key  string
			hard bool
		}{{"Requires", true}, {"Requisite", true}, {"BindsTo", true}, {"Wants", false}} {
			for _, name := range f.list("Unit", dep.key) {
				if strings.Contains(name, "%") {
					continue
				}
				ok, err := unitExists(name)
				switch {
				case err != nil:
					add(kindOther, false, "%s=%s not checked: %v", dep.key, name, err)
				case !ok && dep.hard:
					add(kindDependency, true, "%s=%s: no such unit, so this unit cannot start", dep.key, name)
				case !ok:
					add(kindOther, false, "%s=%s: no such unit (ignored by systemd)", dep.key, name)
				}
			}
		}
	}

	for _, p := range probs {
		if p.error {
			v.Errors = append(v.Errors, p.msg)
		} else {
			v.Warnings = append(v.Warnings, p.msg)
		}
	}
	v.Valid = len(v.Errors) == 0
	return v, probs
}

// checkExec checks one command line of key. The prefixes are systemd's:
// '-' ignore failure, '@' argv[0] follows, ':' no substitution, '+' / '!' /
// '!!' privilege handling.
func checkExec(fsys fs.FS, key, cmd string) (problem, bool) {
	prefixes, rest := splitExecPrefix(cmd)
	optional := strings.Contains(prefixes, "-")
	exe := firstWord(rest)
	if exe == "" || strings.Contains(exe, "%") || strings.Contains(exe, "$") {
		return problem{}, true
	}
	bad := func(format string, args ...any) (problem, bool) {
		msg := fmt.Sprintf("%s=%s: ", key, exe) + fmt.Sprintf(format, args...)
		if optional {
			msg += " (ignored: the command has the '-' prefix)"
		}
		return problem{kind: kindExec, error: !optional, msg: msg}, false
	}
	if !strings.HasPrefix(exe, "/") {
		for _, dir := range strings.Split(defaultExecPath, ":") {
			if info, err := fs.Stat(fsys, fsPath(path.Join(dir, exe))); err == nil && executable(info) {
				return problem{}, true
			}
		}
		return bad("not found in %s", defaultExecPath)
	}
	info, err := fs.Stat(fsys, fsPath(exe))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return bad("does not exist")
	case err != nil:
		return problem{kind: kindExec, msg: fmt.Sprintf("%s=%s not checked: %v", key, exe, err)}, false
	case !info.Mode().IsRegular():
		return bad("is not a regular file")
	case !executable(info):
		return bad("is not executable (mode %v)", info.Mode().Perm())
	}
	return problem{}, true
}

func executable(info fs.FileInfo) bool {
	return info.Mode().IsRegular() && info.Mode().Perm()&0o111 != 0
}

// splitExecPrefix separates systemd's command prefixes from the command.
func splitExecPrefix(cmd string) (prefixes, rest string) {
	i := 0
	for i < len(cmd) && strings.IndexByte("-@:+!", cmd[i]) >= 0 {
		i++
	}
	return cmd[:i], strings.TrimSpace(cmd[i:])
}

// firstWord returns the first word of a command line, unquoting a quoted
// one ("/opt/my app/run" arg).
func firstWord(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	if q := s[0]; q == '"' || q == '\'' {
		if end := strings.IndexByte(s[1:], q); end >= 0 {
			return s[1 : 1+end]
		}
		return s[1:]
	}
	if i := strings.IndexAny(s, " \t"); i >= 0 {
		return s[:i]
	}
	return s
}

// splitWords splits a value into words, honouring double and single
// quotes (Environment="A=1" "B=2 3" C=4).
func splitWords(s string) []string {
	var out []string
	var cur strings.Builder
	inWord := false
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else if c == '\\' && i+1 < len(s) && quote == '"' {
				i++
				cur.WriteByte(s[i])
			} else {
				cur.WriteByte(c)
			}
		case c == '"' || c == '\'':
			quote, inWord = c, true
		case c == ' ' || c == '\t':
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out
}

// environment parses every Environment= line into a map; later
// assignments win, as in systemd.
func environment(values []string) map[string]string {
	env := map[string]string{}
	for _, v := range values {
		for _, w := range splitWords(v) {
			if k, val, ok := strings.Cut(w, "="); ok && k != "" {
				env[k] = val
			}
		}
	}
	return env
}

// skipName reports values the user/group check cannot judge: numeric ids
// and specifiers.
func skipName(s string) bool {
	if strings.Contains(s, "%") {
		return true
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// inDatabase looks name up as the first field of a colon-separated
// database file (etc/passwd, etc/group).
func inDatabase(fsys fs.FS, file, name string) (bool, error) {
	body, err := fs.ReadFile(fsys, file)
	if err != nil {
		return false, fmt.Errorf("cannot read /%s: %w", file, err)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if first, _, ok := strings.Cut(line, ":"); ok && first == name {
			return true, nil
		}
	}
	return false, nil
}

// fsPath turns an absolute path into an fs.FS path rooted at "/".
func fsPath(p string) string {
	p = strings.TrimPrefix(path.Clean("/"+p), "/")
	if p == "" {
		return "."
	}
	return p
}

func parseBool(s string) bool {
	switch strings.ToLower(s) {
	case "1", "yes", "true", "on", "y", "t":
		return true
	}
	return false
}
