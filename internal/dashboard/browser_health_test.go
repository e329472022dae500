package dashboard_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/ids"
)

// healthWords are the health panel's texts, per language.
var healthWords = map[string]map[string]string{
	"en": {"disabled": "Disabled", "closed": "Healthy", "enabled": "Enabled again. Deliveries resume with the next event.",
		"replay": "Replay the 2 deliveries that failed since", "queued": "2 failed deliveries queued for another attempt."},
	"es": {"disabled": "Desactivado", "closed": "En buen estado", "enabled": "Activado de nuevo. Las entregas se reanudan con el próximo evento.",
		"replay": "Reenviar las 2 entregas que fallaron desde", "queued": "2 entregas fallidas en cola para un nuevo intento."},
}

// TestBrowserADisabledPostbackURLIsEnabledAgainAndItsFailuresReplayed: a postback URL that
// deliver disabled for failing shows so on its page; enabling it again offers to replay what
// failed meanwhile, and the replay queues them.
func TestBrowserADisabledPostbackURLIsEnabledAgainAndItsFailuresReplayed(t *testing.T) {
	s := newStack(t, stackOptions{})
	for _, lang := range []string{"en", "es"} {
		t.Run("in "+lang, func(t *testing.T) {
			w := healthWords[lang]
			b := newBrowser(t, s.base, lang, 390, 844)
			email := "pb-health-" + lang + "@example.test"
			b.signUp(s, email, "advertiser", "Postback health "+lang)
			u, err := s.ids.UserByEmail(context.Background(), email)
			if err != nil {
				t.Fatal(err)
			}
			co, ctx := u.CompanyID, context.Background()
			since := time.Now().Add(-6 * 24 * time.Hour)
			for range 2 {
				id := ids.New(ids.Delivery)
				if _, err := s.db.Exec(ctx, `INSERT INTO deliveries (id, company_id, kind, target_id, url, event_id, event_type, body, status,
					attempts, last_error, created_at, updated_at) VALUES ($1, $2, 'postback', $2, 'https://receiver.example/pb', $3, 'commission.status_changed', '{}', 'failed', 1, 'disabled: no successful delivery', $4, $4)`,
					id, co, ids.New(ids.Event), time.Now().Add(-time.Hour)); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := s.db.Exec(ctx, `INSERT INTO delivery_endpoints (kind, target_id, company_id, consecutive_failures, last_failure_at, failing_since, disabled_at, updated_at)
				VALUES ('postback', $1, $1, 900, now(), $2, now(), now())`, co, since); err != nil {
				t.Fatal(err)
			}
			b.open("/app/settings/postbacks")
			b.waitFor("the disabled badge", `document.querySelector('#pb-health .badge')?.textContent === '`+w["disabled"]+`'`)
			b.screenshot("postbacks-disabled")
			b.click("#pb-health button")
			b.flashSays(w["enabled"])
			b.waitFor("the healthy badge and the replay offer", `document.querySelector('#pb-health .badge')?.textContent === '`+w["closed"]+
				`' && document.querySelector('#pb-health button')?.textContent.startsWith('`+w["replay"]+`')`)
			b.click("#pb-health button")
			b.flashSays(w["queued"])
			// Queued for one manual attempt each, which the stack's workers may have made already.
			s.eventually(t, "the replays", func() (bool, string) {
				var n int
				err := s.db.QueryRow(ctx, `SELECT count(*) FROM deliveries d WHERE d.company_id = $1 AND
					((d.status = 'pending' AND d.next_trigger = 'manual') OR EXISTS (SELECT 1 FROM delivery_attempts a WHERE a.delivery_id = d.id AND a.trigger = 'manual'))`, co).Scan(&n)
				return err == nil && n == 2, fmt.Sprintf("%d of 2 deliveries replayed (%v)", n, err)
			})
		})
	}
}
