package bearer

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/BurntSushi/toml"
)

// Prefix starts every secret, so a leaked one is recognisable as ours (a
// secret scanner, a person reading a log) and a wrong string is refused
// before any hashing.
const Prefix = "rmcp_"

// secretBytes of crypto/rand make a secret: 256 bits, beyond any search.
const secretBytes = 32

// secretLen is the length of every secret: the prefix and the random bytes
// in unpadded base64url (characters that need no quoting in a header).
const secretLen = len(Prefix) + (secretBytes*8+5)/6

// Verify hashes a secret from a 64-byte array on the stack; this fails to
// compile if a secret could be longer.
const _ = uint(64 - secretLen)

// Limits of the file and of a token's fields.
const (
	maxFileBytes = 1 << 20
	maxTTL       = 10 * 365 * 24 * time.Hour
)

var nameRe = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$`)

// File is the token file, a small TOML file that lists each token's name,
// role, times and the SHA-256 of its secret. On a Pi it is
// /etc/raspi-mcp/tokens.toml, root:raspi-mcp 0640: the CLI (as root) writes
// it, the agent may only read it, so nothing the agent does can mint a token.
//
// Use one *File for the life of the process: Verify keeps the parsed file
// in it. A File must not be copied after first use.
type File struct {
	Path string
	// Group is given to the file when Create makes it ("raspi-mcp" on a Pi,
	// so the agent can read it); "" leaves the creator's group. A file that
	// exists keeps its owner, group and mode on every rewrite.
	Group string

	snap   atomic.Pointer[snapshot] // Verify's cache, replaced whole
	reload sync.Mutex               // one reload at a time
}

// snapshot is the file as parsed, and the identity of what was parsed: a
// rename gives a new inode, a rewrite in place a new size, mtime or ctime.
type snapshot struct {
	id   fileID
	recs []record
	err  error // a corrupt file fails every Verify until it is fixed
}

type fileID struct {
	missing      bool
	dev, ino     uint64
	size         int64
	mtime, ctime int64 // ctime also moves on a chmod or chown
}

// record is one token as parsed: what List shows and the secret's hash.
type record struct {
	tok  Token
	hash [sha256.Size]byte
}

// Verify returns the token whose secret this is. It is on the path of every
// HTTP request, so it re-reads the file only when the file's identity
// (inode, size, mtime, ctime) changed: a revoke takes effect on the next request,
// and otherwise Verify costs a stat, one hash and a compare per token.
//
// The secret is hashed and compared with every token's hash in constant
// time, without stopping at a match, so the time taken tells nothing about
// which token, or how much of one, matched. An unknown or revoked secret is
// ErrUnknown; an expired one is ErrExpired with the token, so the caller can
// say whose it was. Any other error is the file's (unreadable, corrupt):
// nobody is let in until it is fixed.
func (f *File) Verify(secret string, now time.Time) (Token, error) {
	if len(secret) != secretLen || !strings.HasPrefix(secret, Prefix) {
		return Token{}, ErrUnknown // the shape of a secret is no secret
	}
	s := f.current()
	if s.err != nil {
		return Token{}, s.err
	}
	var buf [64]byte // secretLen fits: hashing from the stack allocates nothing
	sum := sha256.Sum256(buf[:copy(buf[:], secret)])
	found := -1
	for i := range s.recs {
		if subtle.ConstantTimeCompare(sum[:], s.recs[i].hash[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return Token{}, ErrUnknown
	}
	tok := s.recs[found].tok
	if tok.Expired(now) {
		return tok, ErrExpired
	}
	return tok, nil
}

// Expired reports whether the token no longer works at now.
func (t Token) Expired(now time.Time) bool {
	return !t.Expires.IsZero() && !now.Before(t.Expires)
}

// current is the cached snapshot while the file is unchanged, else the
// file read again.
func (f *File) current() *snapshot {
	id, err := statID(f.Path)
	if err != nil {
		return &snapshot{err: fmt.Errorf("bearer: %w", err)}
	}
	if s := f.snap.Load(); s != nil && s.id == id {
		return s
	}
	f.reload.Lock()
	defer f.reload.Unlock()
	if s := f.snap.Load(); s != nil && s.id == id {
		return s // another request reloaded it meanwhile
	}
	s := f.read()
	f.snap.Store(s)
	return s
}

// read parses the file. The identity is taken from the open file, so what
// is cached under it is exactly what was read.
func (f *File) read() *snapshot {
	fh, err := os.Open(f.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return &snapshot{id: fileID{missing: true}} // no token made yet
	}
	if err != nil {
		return &snapshot{err: fmt.Errorf("bearer: %w", err)}
	}
	defer fh.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(fh.Fd()), &st); err != nil {
		return &snapshot{err: fmt.Errorf("bearer: fstat %s: %w", f.Path, err)}
	}
	s := &snapshot{id: idOf(&st)}
	b, err := io.ReadAll(io.LimitReader(fh, maxFileBytes+1))
	if err == nil && len(b) > maxFileBytes {
		err = fmt.Errorf("larger than %d bytes", maxFileBytes)
	}
	if err == nil {
		s.recs, err = parse(b)
	}
	if err != nil {
		s.err = fmt.Errorf("bearer: %s: %w", f.Path, err)
	}
	return s
}

// statID stats the path without allocating a FileInfo: it runs on every
// request.
func statID(path string) (fileID, error) {
	var st syscall.Stat_t
	err := syscall.Stat(path, &st)
	if err == syscall.ENOENT {
		return fileID{missing: true}, nil
	}
	if err != nil {
		return fileID{}, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	return idOf(&st), nil
}

func idOf(st *syscall.Stat_t) fileID {
	return fileID{dev: uint64(st.Dev), ino: uint64(st.Ino), size: st.Size, mtime: mtimeNano(st), ctime: ctimeNano(st)}
}

// List returns the tokens in the order they were made, expired ones too.
// A missing file lists none.
func (f *File) List() ([]Token, error) {
	recs, _, err := f.load()
	if err != nil {
		return nil, err
	}
	toks := make([]Token, len(recs))
	for i, r := range recs {
		toks[i] = r.tok
	}
	return toks, nil
}

// Create makes a token and returns its secret, which exists nowhere else
// afterwards: the file keeps only its SHA-256. ttl 0 means it never expires.
//
// SHA-256 and not a slow password hash (bcrypt, argon2): those make guessing
// a person's weak password expensive, but this secret is 256 random bits, so
// nobody holding the file can search for it however fast the hash is, and a
// slow hash would only cost the Pi milliseconds on every request.
func (f *File) Create(name, role string, ttl time.Duration, now time.Time) (string, Token, error) {
	return f.CreateProfile(name, role, "", ttl, now)
}

// CreateProfile is Create for a token narrowed by profile ("" for none).
// Whether the config defines the profile is the caller's to check; the
// agent refuses every call of a token whose profile it does not know.
func (f *File) CreateProfile(name, role, profile string, ttl time.Duration, now time.Time) (string, Token, error) {
	if err := CheckName(name); err != nil {
		return "", Token{}, err
	}
	if err := CheckRole(role); err != nil {
		return "", Token{}, err
	}
	if err := checkProfile(role, profile); err != nil {
		return "", Token{}, err
	}
	if ttl < 0 || ttl > maxTTL {
		return "", Token{}, fmt.Errorf("bearer: expiry %s: want 0 (never) up to %d days", ttl, maxTTL/(24*time.Hour))
	}
	raw := make([]byte, secretBytes)
	if _, err := rand.Read(raw); err != nil {
		return "", Token{}, fmt.Errorf("bearer: random secret: %w", err)
	}
	secret := Prefix + base64.RawURLEncoding.EncodeToString(raw)
	tok := Token{Name: name, Role: role, Profile: profile, Created: now.UTC().Truncate(time.Second)}
	if ttl > 0 {
		tok.Expires = tok.Created.Add(ttl)
	}
	err := f.update(func(recs []record) ([]record, error) {
		for _, r := range recs {
			if r.tok.Name == name {
				return nil, fmt.Errorf("bearer: a token named %q exists already; revoke it first or pick another name", name)
			}
		}
		return append(recs, record{tok: tok, hash: sha256.Sum256([]byte(secret))}), nil
	})
	if err != nil {
		return "", Token{}, err
	}
	return secret, tok, nil
}

// Revoke deletes the token; the next request with its secret is refused.
func (f *File) Revoke(name string) error {
	if err := CheckName(name); err != nil {
		return err
	}
	return f.update(func(recs []record) ([]record, error) {
		for i, r := range recs {
			if r.tok.Name == name {
				return append(recs[:i:i], recs[i+1:]...), nil
			}
		}
		return nil, fmt.Errorf("bearer: no token named %q in %s (raspi-mcp token list shows them)", name, f.Path)
	})
}

// CheckName accepts a token name: 1 to 32 of a-z, 0-9 and inner hyphens. It
// shows in audit records as token:NAME, so it is kept plain.
func CheckName(name string) error {
	if !nameRe.MatchString(name) {
		return fmt.Errorf("bearer: token name %q: want 1 to 32 of a-z, 0-9 and '-', not starting or ending with '-'", name)
	}
	return nil
}

// CheckRole accepts the roles a token may carry.
func CheckRole(role string) error {
	switch role {
	case RoleRead, RoleOperate, RoleAdmin, RoleMetrics:
		return nil
	}
	return fmt.Errorf("bearer: role %q: want %s, %s, %s or %s", role, RoleRead, RoleOperate, RoleAdmin, RoleMetrics)
}

// profileRe is the shape of a profile name (config.CheckProfileName's):
// the file's own check, so a hand-edited profile cannot smuggle quoting
// into what encode writes.
var profileRe = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)

// checkProfile accepts a token's profile: "" or a profile name, and none on
// a metrics token, which calls no tool a profile could narrow.
func checkProfile(role, profile string) error {
	if profile == "" {
		return nil
	}
	if !profileRe.MatchString(profile) {
		return fmt.Errorf("bearer: profile %q: want 1 to 32 of a-z, 0-9, '_' and '-', starting with a letter", profile)
	}
	if role == RoleMetrics {
		return fmt.Errorf("bearer: profile %q: a metrics token calls no tool; give it no profile", profile)
	}
	return nil
}

// ParseTTL reads an expiry as the CLI takes it: a whole number of minutes,
// hours, days or weeks (30m, 12h, 90d, 8w), or "none" (0: never expires).
func ParseTTL(s string) (time.Duration, error) {
	if s == "none" {
		return 0, nil
	}
	bad := fmt.Errorf("bearer: expiry %q: want a number and a unit (30m, 12h, 90d, 8w) or none", s)
	if len(s) < 2 {
		return 0, bad
	}
	n, err := strconv.ParseUint(s[:len(s)-1], 10, 32)
	if err != nil || n == 0 || s[0] == '+' {
		return 0, bad
	}
	var unit time.Duration
	switch s[len(s)-1] {
	case 'm':
		unit = time.Minute
	case 'h':
		unit = time.Hour
	case 'd':
		unit = 24 * time.Hour
	case 'w':
		unit = 7 * 24 * time.Hour
	default:
		return 0, bad
	}
	if n > uint64(maxTTL/unit) {
		return 0, fmt.Errorf("bearer: expiry %q: at most %d days", s, maxTTL/(24*time.Hour))
	}
	return time.Duration(n) * unit, nil
}

// load reads and parses the file as it is now, bypassing the cache. A
// missing file is an empty one; fi is nil then.
func (f *File) load() ([]record, fs.FileInfo, error) {
	b, err := os.ReadFile(f.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("bearer: %w", err)
	}
	if len(b) > maxFileBytes {
		return nil, nil, fmt.Errorf("bearer: %s: larger than %d bytes", f.Path, maxFileBytes)
	}
	fi, err := os.Stat(f.Path)
	if err != nil {
		return nil, nil, fmt.Errorf("bearer: %w", err)
	}
	recs, err := parse(b)
	if err != nil {
		return nil, nil, fmt.Errorf("bearer: %s: %w", f.Path, err)
	}
	return recs, fi, nil
}

// update changes the file under an exclusive lock, so two CLIs at once
// cannot lose each other's token: read, change, write a temporary file,
// fsync, rename over the old one, fsync the directory. A reader (the agent)
// sees the old file or the new one, never half of one. On any error the
// file is as it was.
func (f *File) update(change func([]record) ([]record, error)) error {
	unlock, err := f.lock()
	if err != nil {
		return err
	}
	defer unlock()
	recs, fi, err := f.load()
	if err != nil {
		return err
	}
	recs, err = change(recs)
	if err != nil {
		return err
	}
	return f.write(encode(recs), fi)
}

// lock takes an flock on Path + ".lock": not on the file itself, which each
// update replaces by a rename.
func (f *File) lock() (func(), error) {
	p := f.Path + ".lock"
	lf, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("bearer: lock: %w", err)
	}
	for {
		err = syscall.Flock(int(lf.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		lf.Close()
		return nil, fmt.Errorf("bearer: lock %s: %w", p, err)
	}
	return func() { lf.Close() }, nil // closing drops the lock
}

// write replaces the file with data. The new file takes the old one's
// owner, group and mode; a first file is 0640 in f.Group.
func (f *File) write(data []byte, old fs.FileInfo) (err error) {
	dir, base := filepath.Split(f.Path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".*.tmp")
	if err != nil {
		return fmt.Errorf("bearer: write %s: %w", f.Path, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
			err = fmt.Errorf("bearer: write %s: %w", f.Path, err)
		}
	}()
	mode, uid, gid := fs.FileMode(0o640), -1, -1
	if old != nil {
		mode = old.Mode().Perm()
		if st, ok := old.Sys().(*syscall.Stat_t); ok {
			uid, gid = int(st.Uid), int(st.Gid)
		}
	} else if f.Group != "" {
		g, err := user.LookupGroup(f.Group)
		if err != nil {
			return err
		}
		if gid, err = strconv.Atoi(g.Gid); err != nil {
			return fmt.Errorf("group %s: gid %q: %w", f.Group, g.Gid, err)
		}
	}
	if err = tmp.Chmod(mode); err != nil {
		return err
	}
	if err = chownIfNeeded(tmp, uid, gid); err != nil {
		return err
	}
	if _, err = tmp.Write(data); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp.Name(), f.Path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return nil // renamed; only the directory's fsync is missing
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("bearer: write %s: sync directory: %w", f.Path, err)
	}
	return nil
}

// chownIfNeeded gives tmp the owner and group wanted (-1: keep), asking only
// for a change: a non-root user may rewrite its own file, but may not give
// the file away, and then the rewrite fails rather than change hands.
func chownIfNeeded(tmp *os.File, uid, gid int) error {
	fi, err := tmp.Stat()
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if uid == int(st.Uid) {
		uid = -1
	}
	if gid == int(st.Gid) {
		gid = -1
	}
	if uid == -1 && gid == -1 {
		return nil
	}
	return tmp.Chown(uid, gid)
}

// fileDoc is the file's TOML: [[token]] tables.
type fileDoc struct {
	Token []fileToken `toml:"token"`
}

type fileToken struct {
	Name    string    `toml:"name"`
	Role    string    `toml:"role"`
	Profile string    `toml:"profile"` // absent in files older than profiles: none
	SHA256  string    `toml:"sha256"`
	Created time.Time `toml:"created"`
	Expires time.Time `toml:"expires"`
}

// parse reads the file strictly: an unknown key, a bad name, role or hash,
// a duplicate name or hash, or an expiry before the creation is an error
// naming the entry, never a token silently skipped or let in.
func parse(b []byte) ([]record, error) {
	var doc fileDoc
	md, err := toml.Decode(string(b), &doc)
	if err != nil {
		return nil, err
	}
	if u := md.Undecoded(); len(u) > 0 {
		return nil, fmt.Errorf("unknown key %q", u[0].String())
	}
	recs := make([]record, 0, len(doc.Token))
	names := map[string]bool{}
	hashes := map[[sha256.Size]byte]bool{}
	for i, t := range doc.Token {
		r, err := t.record()
		if err != nil {
			return nil, fmt.Errorf("token[%d] %q: %w", i, t.Name, err)
		}
		if names[t.Name] {
			return nil, fmt.Errorf("token[%d] %q: name used twice", i, t.Name)
		}
		if hashes[r.hash] {
			return nil, fmt.Errorf("token[%d] %q: sha256 used twice", i, t.Name)
		}
		names[t.Name], hashes[r.hash] = true, true
		recs = append(recs, r)
	}
	return recs, nil
}

func (t fileToken) record() (record, error) {
	if err := CheckName(t.Name); err != nil {
		return record{}, errors.New("name: want 1 to 32 of a-z, 0-9 and inner '-'")
	}
	if err := CheckRole(t.Role); err != nil {
		return record{}, fmt.Errorf("role %q: want %s, %s, %s or %s", t.Role, RoleRead, RoleOperate, RoleAdmin, RoleMetrics)
	}
	if err := checkProfile(t.Role, t.Profile); err != nil {
		return record{}, errors.New(strings.TrimPrefix(err.Error(), "bearer: "))
	}
	r := record{tok: Token{Name: t.Name, Role: t.Role, Profile: t.Profile, Created: t.Created.UTC(), Expires: t.Expires.UTC()}}
	if len(t.SHA256) != hex.EncodedLen(sha256.Size) || strings.ToLower(t.SHA256) != t.SHA256 {
		return record{}, errors.New("sha256: want 64 lowercase hex digits")
	}
	if _, err := hex.Decode(r.hash[:], []byte(t.SHA256)); err != nil {
		return record{}, errors.New("sha256: want 64 lowercase hex digits")
	}
	if t.Created.IsZero() {
		return record{}, errors.New("created: missing")
	}
	if !t.Expires.IsZero() && !t.Expires.After(t.Created) {
		return record{}, errors.New("expires: not after created")
	}
	return r, nil
}

// encode writes the file. Names, roles and hashes are checked to need no
// quoting; times are UTC with as much precision as they have.
func encode(recs []record) []byte {
	var b bytes.Buffer
	b.WriteString("# raspi-mcp bearer tokens: \"raspi-mcp token create|list|revoke\" keeps this file.\n")
	b.WriteString("# Only each secret's SHA-256 is here: reading the file grants nothing.\n")
	for _, r := range recs {
		fmt.Fprintf(&b, "\n[[token]]\nname = %q\nrole = %q\n", r.tok.Name, r.tok.Role)
		if r.tok.Profile != "" {
			fmt.Fprintf(&b, "profile = %q\n", r.tok.Profile)
		}
		fmt.Fprintf(&b, "sha256 = %q\ncreated = %s\n", hex.EncodeToString(r.hash[:]), r.tok.Created.UTC().Format(time.RFC3339Nano))
		if !r.tok.Expires.IsZero() {
			fmt.Fprintf(&b, "expires = %s\n", r.tok.Expires.UTC().Format(time.RFC3339Nano))
		}
	}
	return b.Bytes()
}
