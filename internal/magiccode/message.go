package magiccode

import (
	"fmt"
	"strings"
	"time"

	"github.com/partnerstream/partnerstream/internal/mailer"
)

// texts is the sign-in e-mail in one language. In subject and body %[1]s is the product name;
// in the body %[2]s is the code and %[3]s its validity.
type texts struct {
	subject, body   string
	minute, minutes string
}

var locales = map[string]texts{
	"en": {
		subject: "Your %[1]s sign-in code",
		body: "Your %[1]s sign-in code is:\n\n" +
			"    %[2]s\n\n" +
			"It is valid for %[3]s and works only once.\n\n" +
			"If you did not try to sign in, you can ignore this e-mail: no one can sign in without this code.\n",
		minute: "minute", minutes: "minutes",
	},
	"es": {
		subject: "Tu código de acceso a %[1]s",
		body: "Tu código de acceso a %[1]s es:\n\n" +
			"    %[2]s\n\n" +
			"Es válido durante %[3]s y solo se puede usar una vez.\n\n" +
			"Si no has intentado iniciar sesión, puedes ignorar este correo: nadie puede acceder sin este código.\n",
		minute: "minuto", minutes: "minutos",
	},
}

// message writes the e-mail in the language of locale ("es", "es-MX", "es_AR"...), English
// for any other.
func message(product, to, code, locale string, ttl time.Duration) mailer.Message {
	lang, _, _ := strings.Cut(strings.ToLower(locale), "-")
	lang, _, _ = strings.Cut(lang, "_")
	t, ok := locales[lang]
	if !ok {
		t = locales["en"]
	}
	// Whole minutes, rounded down so the e-mail never promises more time than the code has.
	n := max(int(ttl/time.Minute), 1)
	unit := t.minutes
	if n == 1 {
		unit = t.minute
	}
	validity := fmt.Sprintf("%d %s", n, unit)
	return mailer.Message{
		To:      to,
		Subject: fmt.Sprintf(t.subject, product),
		Text:    fmt.Sprintf(t.body, product, code, validity),
	}
}
