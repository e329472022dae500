package egress

import (
	"errors"
	"net/netip"
	"testing"
)

// FuzzCheckAddr checks the SSRF classifier on any 16 bytes: it never panics, refuses with a
// *RefusedError only, and judges every IPv6 form of an IPv4 address (mapped, compatible,
// translated, NAT64, 6to4, Teredo) at least as strictly as the IPv4 address itself.
func FuzzCheckAddr(f *testing.F) {
	for _, s := range []string{"::ffff:127.0.0.1", "64:ff9b::a9fe:a9fe", "2002:a00:1::", "2001:0:0:0:0:0:80ff:fffe", "::1", "2606:4700::1111", "64:ff9b:1::1"} {
		a := netip.MustParseAddr(s).As16()
		f.Add(a[:])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < 16 {
			return
		}
		ip := netip.AddrFrom16([16]byte(b[:16]))
		err := checkAddr(ip, nil)
		var refused *RefusedError
		if err != nil && !errors.As(err, &refused) {
			t.Fatalf("checkAddr(%s) = %v, not a *RefusedError", ip, err)
		}
		v4 := netip.AddrFrom4([4]byte(b[12:16]))
		if checkAddr(v4, nil) == nil {
			return
		}
		a := ip.As16()
		forms := map[string][16]byte{
			"mapped":     {10: 0xff, 11: 0xff, 12: a[12], 13: a[13], 14: a[14], 15: a[15]},
			"compatible": {12: a[12], 13: a[13], 14: a[14], 15: a[15]},
			"translated": {8: 0xff, 9: 0xff, 12: a[12], 13: a[13], 14: a[14], 15: a[15]},
			"NAT64":      {0: 0, 1: 0x64, 2: 0xff, 3: 0x9b, 12: a[12], 13: a[13], 14: a[14], 15: a[15]},
			"6to4":       {0: 0x20, 1: 0x02, 2: a[12], 3: a[13], 4: a[14], 5: a[15], 15: a[0]},
			"Teredo":     {0: 0x20, 1: 0x01, 4: a[4], 8: a[8], 12: ^a[12], 13: ^a[13], 14: ^a[14], 15: ^a[15]},
		}
		for name, form := range forms {
			if v6 := netip.AddrFrom16(form); checkAddr(v6, nil) == nil {
				t.Errorf("%s is refused, but its %s form %s is allowed", v4, name, v6)
			}
		}
	})
}
