package fraudreview

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
	"github.com/partnerstream/partnerstream/internal/money"
)

// SummaryTopPartners is how many partners the daily e-mail names.
const SummaryTopPartners = 5

// Summary e-mails an advertiser's owners and admins, once a UTC day, what the fraud rules
// held in the last 24 hours and is still held. The api runs it on every replica: the
// fraud_summaries row of the advertiser and day, inserted in the transaction that sends,
// decides which replica sends (another waits on the insert, then finds the row). A summary
// that cannot be sent rolls its row back and is tried again at the next run.
type Summary struct {
	DB      *pgxpool.Pool
	Mailer  mailer.Mailer
	BaseURL string // the dashboard's, for the link to the queue; none when empty
	Now     func() time.Time
	Log     *slog.Logger
}

// held is what the e-mail tells of one advertiser.
type held struct {
	byRule   []count
	amounts  []heldAmount
	partners []count
	total    int64
}

type count struct {
	name string
	n    int64
}

type heldAmount struct {
	currency string
	n        int64
	sum      money.Sum
}

// Send e-mails every advertiser due a summary today; it returns how many it sent.
func (s Summary) Send(ctx context.Context) (int64, error) {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	at := now().UTC()
	day, since := at.Truncate(24*time.Hour), at.Add(-24*time.Hour)
	rows, err := s.DB.Query(ctx, `SELECT DISTINCT c.advertiser_id FROM commissions c WHERE c.held_at >= $1
		AND NOT EXISTS (SELECT 1 FROM fraud_summaries f WHERE f.advertiser_id = c.advertiser_id AND f.day = $2)`, since, day)
	if err != nil {
		return 0, fmt.Errorf("find the advertisers with holds: %w", err)
	}
	advertisers, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, fmt.Errorf("find the advertisers with holds: %w", err)
	}
	var sent int64
	for _, adv := range advertisers {
		ok, err := s.sendOne(ctx, adv, day, since, at)
		if err != nil {
			return sent, err
		}
		if ok {
			sent++
		}
	}
	return sent, nil
}

func (s Summary) sendOne(ctx context.Context, advertiser string, day, since, at time.Time) (bool, error) {
	sent := false
	err := pgx.BeginFunc(ctx, s.DB, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO fraud_summaries (advertiser_id, day, sent_at, recipients) VALUES ($1, $2, $3, 0)
			ON CONFLICT DO NOTHING`, advertiser, day, at)
		if err != nil {
			return fmt.Errorf("claim the fraud summary of %s: %w", advertiser, err)
		}
		if tag.RowsAffected() == 0 {
			return nil // another replica sent it
		}
		h, err := readHeld(ctx, tx, advertiser, since)
		if err != nil {
			return err
		}
		if h.total == 0 {
			return errReleased
		}
		admins, err := identity.Admins(ctx, tx, advertiser)
		if err != nil {
			return err
		}
		var msgs []mailer.Message
		for _, a := range admins {
			msgs = append(msgs, s.message(a.Email, a.Locale, h))
		}
		for _, m := range msgs {
			if err := s.Mailer.Send(ctx, m); err != nil {
				return fmt.Errorf("e-mail the fraud summary of %s: %w", advertiser, err)
			}
		}
		if _, err := tx.Exec(ctx, `UPDATE fraud_summaries SET recipients = $3 WHERE advertiser_id = $1 AND day = $2`,
			advertiser, day, len(msgs)); err != nil {
			return fmt.Errorf("record the fraud summary of %s: %w", advertiser, err)
		}
		sent = true
		if s.Log != nil {
			s.Log.Info("e-mailed the fraud summary", "advertiser", advertiser, "held", h.total, "recipients", len(msgs))
		}
		return nil
	})
	if errors.Is(err, errReleased) {
		return false, nil
	}
	return sent, err
}

// errReleased rolls back the claim of a summary whose holds were all released meanwhile, so
// that a hold later in the day is still told.
var errReleased = errors.New("every hold was released")

// readHeld reads the advertiser's commissions held since then and still held.
func readHeld(ctx context.Context, tx pgx.Tx, advertiser string, since time.Time) (held, error) {
	var h held
	read := func(what, sql string, scan func(pgx.Rows) error) error {
		rows, err := tx.Query(ctx, sql, advertiser, since)
		if err != nil {
			return fmt.Errorf("read the %s of %s: %w", what, advertiser, err)
		}
		defer rows.Close()
		for rows.Next() {
			if err := scan(rows); err != nil {
				return fmt.Errorf("read the %s of %s: %w", what, advertiser, err)
			}
		}
		return rows.Err()
	}
	const scope = `c.advertiser_id = $1 AND c.held_at >= $2`
	if err := read("holds by rule", `SELECT f.code, count(DISTINCT c.id) FROM commissions c
		JOIN fraud_verdicts f ON f.commission_id = c.id AND NOT f.shadow AND f.action = 'hold'
		WHERE `+scope+` GROUP BY f.code ORDER BY 2 DESC, 1`, func(r pgx.Rows) error {
		var c count
		if err := r.Scan(&c.name, &c.n); err != nil {
			return err
		}
		h.byRule = append(h.byRule, c)
		return nil
	}); err != nil {
		return held{}, err
	}
	if err := read("held amounts", `SELECT c.currency, count(*), sum(c.amount)::text FROM commissions c WHERE `+scope+`
		GROUP BY c.currency ORDER BY c.currency`, func(r pgx.Rows) error {
		var a heldAmount
		var sum string
		if err := r.Scan(&a.currency, &a.n, &sum); err != nil {
			return err
		}
		var err error
		a.sum, err = money.ParseSum(sum)
		h.amounts, h.total = append(h.amounts, a), h.total+a.n
		return err
	}); err != nil {
		return held{}, err
	}
	if err := read("partners with holds", `SELECT co.name, count(*) FROM commissions c JOIN companies co ON co.id = c.affiliate_id
		WHERE `+scope+` GROUP BY co.id, co.name ORDER BY 2 DESC, 1 LIMIT `+fmt.Sprint(SummaryTopPartners), func(r pgx.Rows) error {
		var c count
		if err := r.Scan(&c.name, &c.n); err != nil {
			return err
		}
		h.partners = append(h.partners, c)
		return nil
	}); err != nil {
		return held{}, err
	}
	return h, nil
}

// summaryTexts are the e-mail in one language.
type summaryTexts struct {
	subject, intro, byRule, amounts, partners, link string
}

var summaryLocales = map[string]summaryTexts{
	"en": {
		subject:  "PartnerStream held %d commissions in the last day",
		intro:    "Fraud rules held %d commissions in the last 24 hours. They will not be approved or paid until you release or reject them.\n",
		byRule:   "\nBy rule:\n",
		amounts:  "\nCommissions held:\n",
		partners: "\nPartners with the most holds:\n",
		link:     "\nReview them: %s\n",
	},
	"es": {
		subject:  "PartnerStream retuvo %d comisiones en el último día",
		intro:    "Las reglas antifraude retuvieron %d comisiones en las últimas 24 horas. No se aprobarán ni se pagarán hasta que las liberes o las rechaces.\n",
		byRule:   "\nPor regla:\n",
		amounts:  "\nComisiones retenidas:\n",
		partners: "\nSocios con más retenciones:\n",
		link:     "\nRevísalas: %s\n",
	},
}

func (s Summary) message(to, locale string, h held) mailer.Message {
	t, ok := summaryLocales[strings.ToLower(locale)]
	if !ok {
		t = summaryLocales["en"]
	}
	var b strings.Builder
	fmt.Fprintf(&b, t.intro, h.total)
	b.WriteString(t.byRule)
	for _, r := range h.byRule {
		fmt.Fprintf(&b, "  %s: %d\n", r.name, r.n)
	}
	b.WriteString(t.amounts)
	for _, a := range h.amounts {
		fmt.Fprintf(&b, "  %s %s (%d)\n", money.FormatSum(a.sum, a.currency), a.currency, a.n)
	}
	b.WriteString(t.partners)
	for _, p := range h.partners {
		fmt.Fprintf(&b, "  %s: %d\n", p.name, p.n)
	}
	if s.BaseURL != "" {
		fmt.Fprintf(&b, t.link, s.BaseURL+"/app/review?state=held")
	}
	return mailer.Message{To: to, Subject: fmt.Sprintf(t.subject, h.total), Text: b.String()}
}
