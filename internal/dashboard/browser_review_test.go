package dashboard_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/fraud"
)

// reviewWords are what the review page says, per language.
var reviewWords = map[string]map[string]string{
	"en": {"title": "Fraud review", "released": "2 commissions released.", "rejected": "1 commissions rejected.", "evidence": "Clicked",
		"held": "Held", "flagged": "Flagged"},
	"es": {"title": "Revisión antifraude", "released": "2 comisiones liberadas.", "rejected": "1 comisiones rechazadas.", "evidence": "Clic",
		"held": "Retenida", "flagged": "Marcada"},
}

// TestBrowserFraudReview holds two commissions (converted 1 second after their clicks) and
// flags a third (a disposable e-mail), then reviews them on the page: the queue with its
// evidence, its filters, a bulk release and a bulk rejection, on a desktop and on a phone,
// with axe-core finding nothing serious.
func TestBrowserFraudReview(t *testing.T) {
	s := newStack(t, stackOptions{})
	axe := axeSource(t)
	ctx := context.Background()
	for _, lang := range []string{"en", "es"} {
		t.Run("in "+lang, func(t *testing.T) {
			w := reviewWords[lang]
			b := newBrowser(t, s.base, lang, 1280, 800)
			email := "review-" + lang + "@example.test"
			b.signUp(s, email, "advertiser", "Review "+lang)
			key := b.createAPIKey("review")
			s.trafficFor(t, email, "review-aff-"+lang+"@example.test")
			var advertiser, program, code string
			if err := s.db.QueryRow(ctx, `SELECT p.advertiser_id, p.id, l.code FROM programs p JOIN tracking_links l ON l.program_id = p.id
				JOIN users u ON u.company_id = p.advertiser_id WHERE u.email = $1`, email).Scan(&advertiser, &program, &code); err != nil {
				t.Fatal(err)
			}
			if _, err := s.rules.Update(ctx, advertiser, program, map[string]fraud.Change{
				fraud.ConversionTooFast: {Action: ptr(fraud.ActionHold), Params: map[string]any{"min_seconds": int64(30)}}}); err != nil {
				t.Fatal(err)
			}
			later := time.Now().Add(4 * time.Minute).UTC().Format(time.RFC3339)
			for _, c := range []struct{ order, extra string }{
				{"held-1", ""}, {"held-2", ""},
				{"flag-1", fmt.Sprintf(`, "occurred_at": %q, "customer_email": "someone@mailinator.com"`, later)},
				{"ok-1", fmt.Sprintf(`, "occurred_at": %q`, later)},
			} {
				body := fmt.Sprintf(`{"click_id": %q, "external_id": %q, "amount": "40.00"%s}`, s.click(t, code), c.order, c.extra)
				if status, raw := s.call(t, "POST", "/api/v1/conversions", key, body); status != http.StatusCreated {
					t.Fatalf("register %s: %d %s", c.order, status, raw)
				}
			}

			// The clicks reach ClickHouse through Kafka and ingest: the evidence shows once they have.
			rows := `document.querySelectorAll('#queue tbody tr')`
			s.eventually(t, "the held commissions' evidence", func() (bool, string) {
				b.open("/app/review")
				b.settle("the queue")
				var n int
				b.eval(`[...document.querySelectorAll('#queue tbody tr')].filter((r) => r.querySelector('dl.evidence')).length`, &n)
				return n == 3, fmt.Sprintf("%d rows with evidence", n)
			})
			if got := b.text("h1"); got != w["title"] {
				t.Errorf("heading %q, want %q", got, w["title"])
			}
			b.waitFor("three rows, not the honest one", rows+`.length === 3 && !document.getElementById('queue').textContent.includes('ok-1')`)
			b.waitFor("the evidence and the reasons", `document.getElementById('queue').textContent.includes('conversion_too_fast')
				&& document.getElementById('queue').textContent.includes('disposable_email')
				&& document.getElementById('queue').textContent.includes(`+fmt.Sprintf("%q", w["evidence"])+`)`)
			b.checkFits("the review page at 1280x800 (" + lang + ")")
			b.checkAxe("the review page ("+lang+")", axe)
			b.screenshot("advertiser-review")

			// On a phone: nothing scrolls sideways, and axe finds nothing serious.
			b.viewport(390, 844)
			b.open("/app/review")
			b.settle("the queue on a phone")
			b.checkFits("the review page at 390x844 (" + lang + ")")
			b.checkAxe("the review page on a phone ("+lang+")", axe)
			b.screenshot("advertiser-review-phone")
			b.viewport(1280, 800)

			// Only the held ones, then both released at once.
			b.open("/app/review")
			b.settle("the queue")
			b.setValue("#f-state", "held")
			b.click(`#filter-form button[type=submit]`)
			b.waitFor("the held ones only", rows+`.length === 2 && !document.getElementById('queue').textContent.includes('flag-1')`)
			b.rowControl("#queue", "held-1", "input[type=checkbox]")
			b.rowControl("#queue", "held-2", "input[type=checkbox]")
			b.click("#bulk-release")
			b.flashSays(w["released"])
			b.waitFor("nothing held", `document.querySelector('#queue .empty') || `+rows+`.length === 0`)

			// The flagged one, by its rule, rejected.
			b.setValue("#f-state", "any")
			b.setValue("#f-code", "disposable_email")
			b.click(`#filter-form button[type=submit]`)
			b.waitFor("the flagged one", rows+`.length === 1 && document.getElementById('queue').textContent.includes('flag-1')
				&& document.getElementById('queue').textContent.includes(`+fmt.Sprintf("%q", w["flagged"])+`)`)
			b.rowControl("#queue", "flag-1", "input[type=checkbox]")
			b.click("#bulk-reject")
			b.flashSays(w["rejected"])
			var status string
			if err := s.db.QueryRow(ctx, `SELECT c.status FROM commissions c JOIN conversions v ON v.id = c.conversion_id
				WHERE v.external_id = 'flag-1' AND v.advertiser_id = $1`, advertiser).Scan(&status); err != nil || status != "rejected" {
				t.Errorf("the flagged commission is %q (%v), want rejected", status, err)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
