package proto

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// The configuration part of the table. The agent never writes /etc: a
// configuration change over MCP is one drop-in the helper writes, checks
// with its own reading of the rules (only the keys a change over MCP may
// set) and reloads, keeping the previous file to put back.
var (
	ConfigApply   = Method[ConfigApplyReq, ConfigApplyResp]{"config.apply", Quick}
	ConfigRestore = Method[ConfigRestoreReq, ConfigRestoreResp]{"config.restore", Quick}
)

func configMethods() []Info { return []Info{ConfigApply.Info(), ConfigRestore.Info()} }

// MaxDropIn is the largest drop-in config.apply writes, in bytes; it
// matches the agent's own limit and keeps well inside MaxMessage.
const MaxDropIn = 16 << 10

// ConfigApplyReq is the whole new content of the MCP drop-in (TOML), and
// the hash of the diff the agent computed, for the helper's log.
type ConfigApplyReq struct {
	TOML     string `json:"toml"`
	DiffHash string `json:"diff_hash"`
}

// ConfigApplyResp says where the drop-in was written and the helper's
// configuration generation after its reload.
type ConfigApplyResp struct {
	Path       string `json:"path"`
	Generation uint64 `json:"generation"`
}

// ConfigRestoreReq puts back the drop-in the last config.apply replaced
// (or removes the one it created), then reloads. It has no parameters.
type ConfigRestoreReq struct{}

// ConfigRestoreResp reports what was put back.
type ConfigRestoreResp struct {
	Path       string `json:"path"`
	Restored   bool   `json:"restored"` // false: no apply to undo
	Generation uint64 `json:"generation"`
}

// Validate checks the size, the encoding and the hash's form; what the
// TOML may say is the helper's own check.
func (r ConfigApplyReq) Validate() error {
	if len(r.TOML) > MaxDropIn {
		return invalid("toml", len(r.TOML), fmt.Sprintf("proto: config drop-in is %d bytes, more than %d", len(r.TOML), MaxDropIn)).With("max", MaxDropIn)
	}
	if !utf8.ValidString(r.TOML) || strings.ContainsRune(r.TOML, 0) {
		return invalid("toml", "", "proto: config drop-in is not UTF-8 text")
	}
	hex, ok := strings.CutPrefix(r.DiffHash, "sha256:")
	valid := ok && len(hex) == 64
	for _, c := range hex {
		valid = valid && (c >= '0' && c <= '9' || c >= 'a' && c <= 'f')
	}
	if !valid {
		return invalid("diff_hash", clip(r.DiffHash), fmt.Sprintf("proto: diff_hash %q is not sha256:<64 lower-case hex digits>", clip(r.DiffHash)))
	}
	return nil
}

// Validate accepts every ConfigRestoreReq.
func (ConfigRestoreReq) Validate() error { return nil }
