package netinfo

import (
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"strings"
)

// DNSServers returns the nameserver addresses of etc/resolv.conf in file
// order. Lines the resolver would ignore (comments, bad addresses) are
// skipped; link-local servers keep their zone ("fe80::1%eth0").
//
// When systemd-resolved manages the file, the only server listed is its
// local stub (127.0.0.53, or 127.0.0.54 in proxy mode), which says nothing
// about where queries go. The upstream servers are then read from
// run/systemd/resolve/resolv.conf, which resolved keeps up to date; if
// that file is missing or lists nothing, the stub is reported.
//
// A missing etc/resolv.conf (or a dangling link to a stopped resolved's
// stub file) means no servers are configured: nil, no error.
func DNSServers(fsys fs.FS) ([]string, error) {
	r := &fileReader{fsys: fsys}
	servers, err := readNameservers(r, "etc/resolv.conf")
	if err != nil || !onlyStub(servers) {
		return servers, err
	}
	up, err := readNameservers(r, "run/systemd/resolve/resolv.conf")
	if err != nil || len(up) == 0 {
		return servers, err
	}
	return up, nil
}

// onlyStub reports whether every server is a systemd-resolved stub.
func onlyStub(servers []string) bool {
	for _, s := range servers {
		if s != "127.0.0.53" && s != "127.0.0.54" {
			return false
		}
	}
	return len(servers) > 0
}

// readNameservers parses the nameserver lines of a resolv.conf; a missing
// file yields nil.
func readNameservers(r *fileReader, file string) ([]string, error) {
	s, err := r.readString(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s%w", errPrefix, err)
	}
	var out []string
	for line := range strings.Lines(s) {
		var f [2]string
		if fields(line, f[:]) < 2 || f[0] != "nameserver" {
			continue // also comments: "#" and ";" never spell nameserver
		}
		if _, err := netip.ParseAddr(f[1]); err != nil {
			continue // glibc ignores what it cannot parse, so do we
		}
		out = append(out, f[1])
	}
	return out, nil
}
