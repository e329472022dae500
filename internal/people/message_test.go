package people

import (
	"strings"
	"testing"
	"time"
)

func TestInvitationEmailsSpeakTheInvitersLanguage(t *testing.T) {
	s := NewService(nil, nil, Options{BaseURL: "https://p.example"})
	for _, c := range []struct {
		locale, role, want string
	}{
		{"en", Admin, "Acme invites you to join its team on PartnerStream as an admin."},
		{"es-MX", RoleMember, "Acme te invita a unirte a su equipo en PartnerStream como miembro."},
		{"fr", Owner, "as an owner"},
	} {
		m := s.teamMessage("a@b.example", "Acme", c.role, c.locale, 36*time.Hour)
		if !strings.Contains(m.Text, c.want) || !strings.Contains(m.Text, "https://p.example/login?next=/app") {
			t.Errorf("%s: %q, want %q and the sign-in link", c.locale, m.Text, c.want)
		}
		// A day and a half is promised as one day, never two.
		if !strings.Contains(m.Text, " 1 day") && !strings.Contains(m.Text, " 1 día") || strings.Contains(m.Text, " 2 ") || strings.Contains(m.Text, "1 days") {
			t.Errorf("%s: lifetime in %q", c.locale, m.Text)
		}
	}
	m := s.affiliateMessage("a@b.example", "Acme", "Shoes", "es", DefaultTTL)
	if m.Subject != "Acme te invita a su programa de afiliados en PartnerStream" || !strings.Contains(m.Text, "«Shoes»") || !strings.Contains(m.Text, "7 días") {
		t.Errorf("affiliate e-mail %q %q", m.Subject, m.Text)
	}
}
