package egress

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestTheGuardRefusesAddressesThatAreNotPublic(t *testing.T) {
	tests := []struct {
		ip, want string // want is "" when allowed
	}{
		{"127.0.0.1", "refused: 127.0.0.1 is a loopback address"},
		{"127.255.0.9", "refused: 127.255.0.9 is a loopback address"},
		{"::1", "refused: ::1 is a loopback address"},
		{"::ffff:127.0.0.1", "refused: 127.0.0.1 is a loopback address"},
		{"10.1.2.3", "refused: 10.1.2.3 is a private address"},
		{"172.16.0.1", "refused: 172.16.0.1 is a private address"},
		{"172.31.255.255", "refused: 172.31.255.255 is a private address"},
		{"192.168.1.1", "refused: 192.168.1.1 is a private address"},
		{"169.254.169.254", "refused: 169.254.169.254 is the cloud metadata address"},
		{"169.254.10.1", "refused: 169.254.10.1 is a link-local address"},
		{"fe80::1", "refused: fe80::1 is a link-local address"},
		{"100.64.0.1", "refused: 100.64.0.1 is a carrier-grade NAT address"},
		{"100.127.255.254", "refused: 100.127.255.254 is a carrier-grade NAT address"},
		{"fc00::1", "refused: fc00::1 is a unique local address"},
		{"fd12:3456::1", "refused: fd12:3456::1 is a unique local address"},
		{"0.0.0.0", "refused: 0.0.0.0 is an unspecified address"},
		{"::", "refused: :: is an unspecified address"},
		{"224.0.0.1", "refused: 224.0.0.1 is a multicast address"},
		{"ff02::1", "refused: ff02::1 is a multicast address"},
		{"fe80::1%eth0", "refused: fe80::1 is a link-local address"},
		// IPv6 addresses that carry an IPv4 address reach it: the IPv4 address is checked too.
		{"64:ff9b::a9fe:a9fe", "refused: 64:ff9b::a9fe:a9fe is a NAT64 address of 169.254.169.254, the cloud metadata address"},
		{"64:ff9b::7f00:1", "refused: 64:ff9b::7f00:1 is a NAT64 address of 127.0.0.1, a loopback address"},
		{"64:ff9b::a00:1", "refused: 64:ff9b::a00:1 is a NAT64 address of 10.0.0.1, a private address"},
		{"64:ff9b:1::a9fe:a9fe", "refused: 64:ff9b:1::a9fe:a9fe is a local-use NAT64 address, whose IPv4 address cannot be known"},
		{"64:ff9b:1:ffff::808:808", "refused: 64:ff9b:1:ffff::808:808 is a local-use NAT64 address, whose IPv4 address cannot be known"},
		{"2002:a9fe:a9fe::1", "refused: 2002:a9fe:a9fe::1 is a 6to4 address of 169.254.169.254, the cloud metadata address"},
		{"2002:c0a8:101:1::1", "refused: 2002:c0a8:101:1::1 is a 6to4 address of 192.168.1.1, a private address"},
		{"2001:0:4136:e378:8000:63bf:80ff:fffe", "refused: 2001:0:4136:e378:8000:63bf:80ff:fffe is a Teredo address of 127.0.0.1, a loopback address"},
		{"2001:0:4136:e378:8000:63bf:5601:5601", "refused: 2001:0:4136:e378:8000:63bf:5601:5601 is a Teredo address of 169.254.169.254, the cloud metadata address"},
		{"::a9fe:a9fe", "refused: ::a9fe:a9fe is an IPv4-compatible address of 169.254.169.254, the cloud metadata address"},
		{"::7f00:1", "refused: ::7f00:1 is an IPv4-compatible address of 127.0.0.1, a loopback address"},
		{"::ffff:0:a9fe:a9fe", "refused: ::ffff:0:a9fe:a9fe is an IPv4-translated address of 169.254.169.254, the cloud metadata address"},
		{"::ffff:169.254.169.254", "refused: 169.254.169.254 is the cloud metadata address"},
		{"64:ff9b::808:808", ""},                     // NAT64 to a public address
		{"2002:808:808::1", ""},                      // 6to4 of a public address
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", ""}, // Teredo of 192.0.2.45 (RFC 4380's example)
		{"::808:808", ""},                            // IPv4-compatible public address
		{"2001:db8::1", ""},                          // not Teredo: 2001:db8::/32 is outside 2001::/32
		{"8.8.8.8", ""},
		{"172.32.0.1", ""},
		{"100.128.0.1", ""},
		{"2606:4700::1111", ""},
	}
	for _, tt := range tests {
		t.Run(tt.ip, func(t *testing.T) {
			err := checkAddr(netip.MustParseAddr(tt.ip), nil)
			got := ""
			if err != nil {
				got = err.Error()
				var refused *RefusedError
				if !errors.As(err, &refused) {
					t.Errorf("the error is a %T, want a *RefusedError", err)
				}
			}
			if got != tt.want {
				t.Errorf("checkAddr(%s) = %q, want %q", tt.ip, got, tt.want)
			}
		})
	}
}

// TestTheDialerRefusesBeforeConnecting asks the dialer's Control hook, which runs after
// the socket is made and before connect, for its decision: nothing is sent anywhere.
func TestTheDialerRefusesBeforeConnecting(t *testing.T) {
	control := Dialer(nil, time.Second).Control
	for address, want := range map[string]string{
		"[64:ff9b::a9fe:a9fe]:443":     "is a NAT64 address of 169.254.169.254, the cloud metadata address",
		"[64:ff9b:1::a9fe:a9fe]:443":   "is a local-use NAT64 address, whose IPv4 address cannot be known",
		"[2002:7f00:1::1]:80":          "is a 6to4 address of 127.0.0.1, a loopback address",
		"[2001:0:1:2:0:0:f5ff:fffe]:0": "is a Teredo address of 10.0.0.1, a private address",
		"[::a9fe:a9fe]:80":             "is an IPv4-compatible address of 169.254.169.254",
		"[::ffff:10.0.0.1]:80":         "refused: 10.0.0.1 is a private address",
		"[fe80::1%lo]:80":              "refused: fe80::1 is a link-local address",
		"127.0.0.1:80":                 "refused: 127.0.0.1 is a loopback address",
		"not an address":               "refused: cannot check address",
	} {
		err := control("tcp", address, nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Control(%q) = %v, want an error containing %q", address, err, want)
		}
	}
	for _, address := range []string{"[64:ff9b::808:808]:443", "[2606:4700::1111]:443", "8.8.8.8:53"} {
		if err := control("tcp", address, nil); err != nil {
			t.Errorf("Control(%q) = %v, want it allowed", address, err)
		}
	}
	allow := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	if err := Dialer(allow, time.Second).Control("tcp", "[64:ff9b::a00:1]:443", nil); err != nil {
		t.Errorf("an allow-listed IPv4 address behind NAT64 was refused: %v", err)
	}
}

func TestTheAllowListAdmitsItsRanges(t *testing.T) {
	allow, err := ParseAllowList([]string{"127.0.0.0/8", " 10.1.0.0/16 ", "fd00::5", ""})
	if err != nil {
		t.Fatal(err)
	}
	for ip, allowed := range map[string]bool{
		"127.0.0.1": true, "::ffff:127.0.0.2": true, "10.1.200.3": true, "10.2.0.1": false, "fd00::5": true, "fd00::6": false,
		"169.254.169.254": false, "::1": false,
	} {
		if got := checkAddr(netip.MustParseAddr(ip), allow) == nil; got != allowed {
			t.Errorf("%s allowed = %v, want %v", ip, got, allowed)
		}
	}
	for _, bad := range []string{"10.0.0.0/33", "localhost", "1.2.3"} {
		if _, err := ParseAllowList([]string{bad}); err == nil {
			t.Errorf("ParseAllowList(%q) accepted it", bad)
		}
	}
}
