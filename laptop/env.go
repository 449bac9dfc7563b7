package laptop

import (
	"errors"
	"fmt"
	"strings"
)

// SSHEnv is the environment to start ssh with: env itself, plus on Windows
// what Win32-OpenSSH needs and a desktop app's reduced environment may lack.
// Claude's desktop apps start stdio servers without PROGRAMDATA; ssh.exe
// then cannot find %PROGRAMDATA%\ssh\ssh_config and exits 255 before it
// prints anything. SystemRoot is where Windows finds the Winsock provider
// and CryptoAPI's libraries; USERPROFILE is where ssh.exe finds ~\.ssh
// (keys, known_hosts, config); HOME is what the MSYS ssh of Git for Windows
// reads instead, should it come first on PATH. profile is the user's
// profile directory as Windows reports it for this process's token ("" if
// unknown); it stands in for USERPROFILE when that is missing.
//
// A variable that is set, even to something odd, is left alone: the person
// may have set it on purpose. Windows spells names in any case, so they are
// matched without case.
func SSHEnv(env []string, goos, profile string) []string {
	out := append([]string(nil), env...)
	if goos != "windows" {
		return out
	}
	get := func(name string) (string, bool) {
		for _, kv := range out {
			if k, v, ok := strings.Cut(kv, "="); ok && k != "" && strings.EqualFold(k, name) {
				return v, v != ""
			}
		}
		return "", false
	}
	set := func(name, value string) {
		if _, ok := get(name); ok || value == "" {
			return
		}
		// An empty entry (NAME=) counts as missing: drop it first.
		kept := out[:0]
		for _, kv := range out {
			if k, _, _ := strings.Cut(kv, "="); !strings.EqualFold(k, name) {
				kept = append(kept, kv)
			}
		}
		out = append(kept, name+"="+value)
	}
	drive, ok := get("SystemDrive")
	if !ok {
		drive = `C:`
	}
	root, ok := get("SystemRoot")
	if !ok {
		if root, ok = get("windir"); !ok {
			root = drive + `\Windows`
		}
	}
	set("SystemRoot", root)
	set("windir", root)
	data, ok := get("PROGRAMDATA")
	if !ok {
		if data, ok = get("ALLUSERSPROFILE"); !ok {
			data = drive + `\ProgramData`
		}
	}
	set("PROGRAMDATA", data)
	set("ALLUSERSPROFILE", data)
	home, ok := get("USERPROFILE")
	if !ok {
		home = profile
		if hd, okd := get("HOMEDRIVE"); home == "" && okd {
			if hp, okp := get("HOMEPATH"); okp {
				home = hd + hp
			}
		}
	}
	set("USERPROFILE", home)
	set("HOME", home)
	return out
}

// FindSSH is the ssh client to run: "ssh" on PATH, or on Windows the one
// Windows ships (%SystemRoot%\System32\OpenSSH\ssh.exe), which a reduced
// PATH may not name. look is exec.LookPath; exists says whether a file is
// there.
func FindSSH(goos string, env []string, look func(string) (string, error), exists func(string) bool) (string, error) {
	p, err := look("ssh")
	if err == nil {
		return p, nil
	}
	if goos == "windows" {
		root := `C:\Windows`
		for _, kv := range env {
			if k, v, _ := strings.Cut(kv, "="); strings.EqualFold(k, "SystemRoot") && v != "" {
				root = v
			}
		}
		if p := root + `\System32\OpenSSH\ssh.exe`; exists(p) {
			return p, nil
		}
		return "", fmt.Errorf("laptop: no ssh on PATH nor at %s\\System32\\OpenSSH\\ssh.exe: %w", root, errNoSSH)
	}
	return "", fmt.Errorf("laptop: no ssh on PATH: %w", errNoSSH)
}

var errNoSSH = errors.New("the OpenSSH client is not installed")
