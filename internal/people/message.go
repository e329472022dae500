package people

import (
	"fmt"
	"strings"
	"time"

	"github.com/partnerstream/partnerstream/internal/mailer"
)

// texts are the invitation e-mails in one language. The verbs take the values in the order
// their comments give.
type texts struct {
	// product, company, role
	teamSubject, teamBody string
	// product, brand, program
	affSubject, affBody string
	// the lifetime ("7 days"), then the link line
	validity, link string
	day, days      string
	roles          map[string]string
}

var locales = map[string]texts{
	"en": {
		teamSubject: "You are invited to %[2]s on %[1]s",
		teamBody:    "%[2]s invites you to join its team on %[1]s as %[3]s.\n\n",
		affSubject:  "%[2]s invites you to its affiliate program on %[1]s",
		affBody: "%[2]s invites you to join its program \"%[3]s\" on %[1]s as an affiliate.\n\n" +
			"Sign in with this address, or sign up as an affiliate if you have no account yet, and accept the invitation on the Programs page.\n\n",
		validity: "The invitation is valid for %s. Sign in with this e-mail address to accept it.\n",
		day:      "day", days: "days",
		link:  "Sign in: %s\n",
		roles: map[string]string{Owner: "an owner", Admin: "an admin", RoleMember: "a member"},
	},
	"es": {
		teamSubject: "Te invitan a %[2]s en %[1]s",
		teamBody:    "%[2]s te invita a unirte a su equipo en %[1]s como %[3]s.\n\n",
		affSubject:  "%[2]s te invita a su programa de afiliados en %[1]s",
		affBody: "%[2]s te invita a unirte a su programa «%[3]s» en %[1]s como afiliado.\n\n" +
			"Inicia sesión con esta dirección, o regístrate como afiliado si aún no tienes cuenta, y acepta la invitación en la página Programas.\n\n",
		validity: "La invitación es válida durante %s. Inicia sesión con esta dirección de correo para aceptarla.\n",
		day:      "día", days: "días",
		link:  "Iniciar sesión: %s\n",
		roles: map[string]string{Owner: "propietario", Admin: "administrador", RoleMember: "miembro"},
	},
}

// lang picks the texts of locale ("es", "es-MX", "es_AR"...), English for any other.
func lang(locale string) texts {
	l, _, _ := strings.Cut(strings.ToLower(locale), "-")
	l, _, _ = strings.Cut(l, "_")
	if t, ok := locales[l]; ok {
		return t
	}
	return locales["en"]
}

// footer says how long the invitation lasts (whole days, rounded down so it never promises
// more) and where to sign in.
func (s *Service) footer(t texts, ttl time.Duration, next string) string {
	n, unit := max(int(ttl/(24*time.Hour)), 1), t.days
	if n == 1 {
		unit = t.day
	}
	out := fmt.Sprintf(t.validity, fmt.Sprintf("%d %s", n, unit))
	if s.o.BaseURL != "" {
		out += fmt.Sprintf(t.link, s.o.BaseURL+"/login?next="+next)
	}
	return out
}

func (s *Service) teamMessage(to, company, role, locale string, ttl time.Duration) mailer.Message {
	t := lang(locale)
	return mailer.Message{
		To:      to,
		Subject: fmt.Sprintf(t.teamSubject, s.o.ProductName, company),
		Text:    fmt.Sprintf(t.teamBody, s.o.ProductName, company, t.roles[role]) + s.footer(t, ttl, "/app"),
	}
}

func (s *Service) affiliateMessage(to, brand, program, locale string, ttl time.Duration) mailer.Message {
	t := lang(locale)
	return mailer.Message{
		To:      to,
		Subject: fmt.Sprintf(t.affSubject, s.o.ProductName, brand),
		Text:    fmt.Sprintf(t.affBody, s.o.ProductName, brand, program) + s.footer(t, ttl, "/app/programs"),
	}
}
