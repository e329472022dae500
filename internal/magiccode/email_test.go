package magiccode_test

import (
	"errors"
	"net/mail"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/partnerstream/partnerstream/internal/magiccode"
)

func TestNormalizeEmail(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, want string // want "" means invalid
	}{
		{"ana@example.com", "ana@example.com"},
		{"  Ana.Lopez+promo@Example.COM\t", "ana.lopez+promo@example.com"},
		{"o'brien@sub.example.co.uk", "o'brien@sub.example.co.uk"},
		{"josé@ejemplo.es", "josé@ejemplo.es"},
		{"", ""},
		{"ana", ""},
		{"@example.com", ""},
		{"ana@", ""},
		{"ana@localhost", ""},
		{"ana@[192.0.2.1]", ""},
		{"ana@@example.com", ""},
		{"ana..lopez@example.com", ""},
		{`"ana lopez"@example.com`, ""},
		{"Ana <ana@example.com>", ""},
		{"ana@example.com (Ana)", ""},
		{"ana@example.com, bob@example.com", ""},
		{"ana@example.com\nBcc: bob@example.com", ""},
		{strings.Repeat("a", 65) + "@example.com", ""},
		{strings.Repeat("a", 64) + "@" + strings.Repeat("b", 185) + ".com", strings.Repeat("a", 64) + "@" + strings.Repeat("b", 185) + ".com"},
		{strings.Repeat("a", 64) + "@" + strings.Repeat("b", 186) + ".com", ""},
	}
	for _, tt := range tests {
		got, err := magiccode.NormalizeEmail(tt.in)
		switch {
		case tt.want == "" && !errors.Is(err, magiccode.ErrInvalidEmail):
			t.Errorf("NormalizeEmail(%q) = %q, %v; want ErrInvalidEmail", tt.in, got, err)
		case tt.want != "" && (err != nil || got != tt.want):
			t.Errorf("NormalizeEmail(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

// FuzzNormalizeEmail checks what callers rely on: an accepted address is a short, bare,
// parseable address in its own canonical form, and anything else is ErrInvalidEmail.
func FuzzNormalizeEmail(f *testing.F) {
	for _, s := range []string{"ana@example.com", " A@B.CO ", "İ@example.com", "\"a\"@b.c", "a@b", "K@example.com", "a\x00@b.c", "a@b.c\r\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := magiccode.NormalizeEmail(in)
		if err != nil {
			if !errors.Is(err, magiccode.ErrInvalidEmail) || got != "" {
				t.Fatalf("NormalizeEmail(%q) = %q, %v", in, got, err)
			}
			return
		}
		if len(got) > 254 || !utf8.ValidString(got) || got != strings.ToLower(got) || strings.ContainsAny(got, " \t\r\n<>,") {
			t.Fatalf("NormalizeEmail(%q) = %q: not a canonical address", in, got)
		}
		if a, err := mail.ParseAddress(got); err != nil || a.Address != got || a.Name != "" {
			t.Fatalf("NormalizeEmail(%q) = %q, which parses as %v, %v", in, got, a, err)
		}
		if again, err := magiccode.NormalizeEmail(got); err != nil || again != got {
			t.Fatalf("NormalizeEmail is not idempotent on %q: %q, %v", got, again, err)
		}
	})
}
