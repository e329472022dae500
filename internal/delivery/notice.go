package delivery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/mailer"
)

// Notices tells the owners and admins of a company by e-mail that one of its webhooks or its
// postback URL was disabled for failing (disableDead), once per disabling. The api runs it:
// it has the mail relay. A notice that cannot be sent is tried again at the next run.
type Notices struct {
	DB      *pgxpool.Pool
	Mailer  mailer.Mailer
	BaseURL string // the dashboard's, for the link; none when empty
	Now     func() time.Time
	Log     *slog.Logger
}

// noticeTexts are the notice in one language; the verbs take (what, URL, since, days).
type noticeTexts struct {
	subject, body, webhook, postback, link string
}

var noticeLocales = map[string]noticeTexts{
	"en": {
		subject: "PartnerStream disabled %s",
		body:    "We disabled %s (%s): it has not accepted a single delivery since %s (%d days).\n\nIts deliveries of that time failed. Once the receiver works again, enable it in the dashboard and replay them from there.\n",
		webhook: "your webhook", postback: "your postback URL",
		link: "Dashboard: %s\n",
	},
	"es": {
		subject: "PartnerStream desactivó %s",
		body:    "Hemos desactivado %s (%s): no ha aceptado ninguna entrega desde el %s (%d días).\n\nSus entregas de ese periodo fallaron. Cuando el receptor vuelva a funcionar, actívalo en el panel y reenvíalas desde allí.\n",
		webhook: "tu webhook", postback: "tu URL de postback",
		link: "Panel: %s\n",
	},
}

// Send e-mails every disabling not told yet. Each target is claimed in a transaction
// (SKIP LOCKED), so api replicas running it together send each notice once.
func (n Notices) Send(ctx context.Context) error {
	for {
		done, err := n.sendOne(ctx)
		if err != nil || !done {
			return err
		}
	}
}

// sendOne tells one disabling; false when none is left.
func (n Notices) sendOne(ctx context.Context) (bool, error) {
	now := time.Now
	if n.Now != nil {
		now = n.Now
	}
	found := false
	err := pgx.BeginFunc(ctx, n.DB, func(tx pgx.Tx) error {
		var kind, target, company string
		var since *time.Time
		var disabled time.Time
		err := tx.QueryRow(ctx, `SELECT kind, target_id, company_id, failing_since, disabled_at FROM delivery_endpoints
WHERE disabled_at IS NOT NULL AND notified_at IS NULL ORDER BY disabled_at LIMIT 1 FOR UPDATE SKIP LOCKED`).Scan(&kind, &target, &company, &since, &disabled)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("find a disabled delivery target to tell: %w", err)
		}
		found = true
		var url string
		if err := tx.QueryRow(ctx, `SELECT url FROM deliveries WHERE company_id = $1 AND kind = $2 AND target_id = $3 ORDER BY id DESC LIMIT 1`,
			company, kind, target).Scan(&url); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("find the URL of %s %s: %w", kind, target, err)
		}
		admins, err := identity.Admins(ctx, tx, company)
		if err != nil {
			return err
		}
		var to []mailer.Message
		for _, a := range admins {
			to = append(to, n.message(a.Email, a.Locale, kind, url, since, disabled))
		}
		for _, m := range to {
			if err := n.Mailer.Send(ctx, m); err != nil {
				return fmt.Errorf("e-mail that %s %s was disabled: %w", kind, target, err)
			}
		}
		if _, err := tx.Exec(ctx, `UPDATE delivery_endpoints SET notified_at = $3 WHERE kind = $1 AND target_id = $2`, kind, target, now()); err != nil {
			return fmt.Errorf("record the notice of %s %s: %w", kind, target, err)
		}
		if n.Log != nil {
			n.Log.Info("told the admins that a delivery target was disabled", "kind", kind, "target", target, "company", company, "recipients", len(to))
		}
		return nil
	})
	return found && err == nil, err
}

func (n Notices) message(to, locale, kind, url string, since *time.Time, disabled time.Time) mailer.Message {
	t, ok := noticeLocales[strings.ToLower(locale)]
	if !ok {
		t = noticeLocales["en"]
	}
	what, page := t.webhook, "/app/settings/webhooks"
	if kind == KindPostback {
		what, page = t.postback, "/app/settings/postbacks"
	}
	from := disabled
	if since != nil {
		from = *since
	}
	text := fmt.Sprintf(t.body, what, url, from.UTC().Format("2006-01-02 15:04 MST"), int(disabled.Sub(from)/(24*time.Hour)))
	if n.BaseURL != "" {
		text += fmt.Sprintf(t.link, n.BaseURL+page)
	}
	return mailer.Message{To: to, Subject: fmt.Sprintf(t.subject, what), Text: text}
}
