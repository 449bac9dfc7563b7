package netinfo

import (
	"io/fs"
	"testing"
	"testing/fstest"
)

func TestDNSServersFixtures(t *testing.T) {
	for _, tc := range []struct {
		board string
		want  []string
	}{
		{"pi4", []string{"192.168.1.1", "fe80::1%eth0"}},
		{"pi-resolved", []string{"192.168.1.1", "fd00::1"}}, // upstream of the 127.0.0.53 stub
		{"v6off", []string{"10.0.0.1"}},
	} {
		t.Run(tc.board, func(t *testing.T) {
			got, err := DNSServers(fixture(tc.board))
			if err != nil {
				t.Fatal(err)
			}
			same(t, "servers", got, tc.want)
		})
	}
}

func TestDNSServers(t *testing.T) {
	const stub = "nameserver 127.0.0.53\noptions edns0 trust-ad\nsearch lan\n"
	for _, tc := range []struct {
		name           string
		resolv, upstrm string // "" = file absent
		want           []string
	}{
		{"no resolv.conf", "", "", nil},
		{"empty", "\n", "", nil},
		{"stub without upstream file", stub, "", []string{"127.0.0.53"}},
		{"stub with empty upstream", stub, "# no servers yet\n", []string{"127.0.0.53"}},
		{"proxy stub", "nameserver 127.0.0.54\n", "nameserver 9.9.9.9\nnameserver 149.112.112.112\n", []string{"9.9.9.9", "149.112.112.112"}},
		{"stub beside a real server", "nameserver 127.0.0.53\nnameserver 1.1.1.1\n", "nameserver 9.9.9.9\n", []string{"127.0.0.53", "1.1.1.1"}},
		{
			"comments and junk",
			"# nameserver 8.8.8.8\n; nameserver 8.8.4.4\n  nameserver\t1.1.1.1   # Cloudflare\nnameserver dns.example\nnameserver\nnameserver 2606:4700:4700::1111\r\ndomain lan\n",
			"",
			[]string{"1.1.1.1", "2606:4700:4700::1111"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := fstest.MapFS{}
			if tc.resolv != "" {
				m["etc/resolv.conf"] = &fstest.MapFile{Data: []byte(tc.resolv)}
			}
			if tc.upstrm != "" {
				m["run/systemd/resolve/resolv.conf"] = &fstest.MapFile{Data: []byte(tc.upstrm)}
			}
			got, err := DNSServers(m)
			if err != nil {
				t.Fatal(err)
			}
			same(t, "servers", got, tc.want)
		})
	}
}

func TestDNSServersReadError(t *testing.T) {
	m := fstest.MapFS{"etc/resolv.conf": &fstest.MapFile{Mode: fs.ModeDir}}
	_, err := DNSServers(m)
	wantErr(t, err, "etc/resolv.conf")
}
