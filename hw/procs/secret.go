package procs

import "strings"

// Redacted replaces a hidden value.
const Redacted = "[redacted]"

// Secret reports whether an environment key looks like it holds a secret.
// Case-insensitive; the key is split into words at '_', '-', '.' and
// lower→upper case changes (apiKey), and:
//
//   - a key containing TOKEN, SECRET, PASSWORD, PASSWD, PASSPHRASE,
//     CREDENTIAL, COOKIE, SESSION, PRIVATE, APIKEY, ACCESSKEY, AUTHKEY,
//     CONNECTIONSTRING or CONNSTR (separators ignored) is a secret;
//   - so is a key with one of the words KEY, KEYS, PASS, PWD, AUTH,
//     OAUTH, AUTHORIZATION, DSN, JWT, BEARER, SALT, SIGNING, PSK, OTP or
//     TOTP as a whole word: API_KEY, KEY_FILE, MYSQL_PWD, DB_PASS,
//     SENTRY_DSN, but not KEYBOARD, KEYMAP, PASSENGER or COMPASS;
//   - except the few standard keys holding a path or an id: PWD and
//     OLDPWD (the working directory), SSH_AUTH_SOCK, SESSION_MANAGER,
//     DESKTOP_SESSION and the XDG_SESSION_* ones.
//
// It errs on the side of hiding: a redacted harmless value costs the
// reader a little, a leaked token costs its owner a rotation.
func Secret(key string) bool {
	u := strings.ToUpper(key)
	switch u {
	case "PWD", "OLDPWD", "SSH_AUTH_SOCK", "SESSION_MANAGER", "DESKTOP_SESSION",
		"XDG_SESSION_ID", "XDG_SESSION_TYPE", "XDG_SESSION_CLASS", "XDG_SESSION_DESKTOP", "XDG_SESSION_PATH":
		return false
	}
	joined := strings.Map(func(r rune) rune {
		if r == '_' || r == '-' || r == '.' {
			return -1
		}
		return r
	}, u)
	for _, s := range [...]string{
		"TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL", "COOKIE", "SESSION",
		"PRIVATE", "APIKEY", "ACCESSKEY", "AUTHKEY", "CONNECTIONSTRING", "CONNSTR",
	} {
		if strings.Contains(joined, s) {
			return true
		}
	}
	for _, w := range words(key) {
		switch strings.ToUpper(w) {
		case "KEY", "KEYS", "PASS", "PWD", "AUTH", "OAUTH", "AUTHORIZATION", "DSN", "JWT",
			"BEARER", "SALT", "SIGNING", "PSK", "OTP", "TOTP":
			return true
		}
	}
	return false
}

// words splits key at separators and at lower→upper case changes.
func words(key string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(key); i++ {
		boundary := i == len(key) || key[i] == '_' || key[i] == '-' || key[i] == '.'
		if boundary {
			if i > start {
				out = append(out, key[start:i])
			}
			start = i + 1
			continue
		}
		if i > start && isLower(key[i-1]) && isUpper(key[i]) {
			out = append(out, key[start:i])
			start = i
		}
	}
	return out
}

func isLower(c byte) bool { return c >= 'a' && c <= 'z' }
func isUpper(c byte) bool { return c >= 'A' && c <= 'Z' }

// RedactValue returns value as it may be shown: [Redacted] when [Secret]
// says key holds a secret; otherwise value with the passwords it embeds
// hidden, because a DATABASE_URL or a --dsn carries one without a
// secret-looking name:
//
//   - the password of URLs with user info: postgres://user:pass@host →
//     postgres://user:[redacted]@host;
//   - the value of secret-looking NAME=VALUE pairs inside the value, as in
//     URL queries (?sslpassword=x&api_key=y), libpq DSNs (password=x) and
//     connection strings (Password=x;).
func RedactValue(key, value string) string {
	if Secret(key) {
		return Redacted
	}
	return redactPairs(redactURLs(value))
}

// redactURLs hides the password of every scheme://user:password@host in s.
// The user info ends at the last '@' before the first '/' that follows the
// first '@': passwords with an unescaped '@' or '/' are still hidden, and
// an '@' in the path or query does not swallow the host.
func redactURLs(s string) string {
	var b strings.Builder
	rest := s
	for {
		i := strings.Index(rest, "://")
		if i < 0 {
			break
		}
		authStart := i + 3
		seg := rest[authStart:]
		if end := strings.IndexAny(seg, " \t\n\r\"'<>"); end >= 0 {
			seg = seg[:end]
		}
		at := strings.IndexByte(seg, '@')
		if at < 0 {
			b.WriteString(rest[:authStart])
			rest = rest[authStart:]
			continue
		}
		limit := len(seg)
		if slash := strings.IndexByte(seg[at:], '/'); slash >= 0 {
			limit = at + slash
		}
		at = strings.LastIndexByte(seg[:limit], '@')
		colon := strings.IndexByte(seg[:at], ':')
		if colon < 0 {
			b.WriteString(rest[:authStart+at+1])
			rest = rest[authStart+at+1:]
			continue
		}
		b.WriteString(rest[:authStart+colon+1])
		b.WriteString(Redacted)
		rest = rest[authStart+at:]
	}
	if b.Len() == 0 {
		return s
	}
	b.WriteString(rest)
	return b.String()
}

// redactPairs hides the value of every NAME=VALUE in s whose NAME is a
// [Secret]. The value ends at '&', ';', ',', whitespace or a quote.
func redactPairs(s string) string {
	var b strings.Builder
	done := 0 // s[:done] is written to b, or unchanged if b is empty
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			continue
		}
		start := i
		for start > 0 && isNameByte(s[start-1]) {
			start--
		}
		if start == i || !Secret(s[start:i]) {
			continue
		}
		end := i + 1
		for end < len(s) && !strings.ContainsRune("&;, \t\n\r\"'", rune(s[end])) {
			end++
		}
		if end == i+1 || s[i+1:end] == Redacted {
			continue
		}
		b.WriteString(s[done : i+1])
		b.WriteString(Redacted)
		done = end
		i = end - 1
	}
	if done == 0 {
		return s
	}
	b.WriteString(s[done:])
	return b.String()
}

func isNameByte(c byte) bool {
	return isLower(c) || isUpper(c) || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.'
}
