package delivery_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/delivery"
	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/testenv"
)

func TestTheAdminsAreToldOnceThatATargetWasDisabled(t *testing.T) {
	f := newHistoryFixture(t)
	ctx := context.Background()
	m, inbox := testenv.SMTPMailer(t)
	// The fixture's owner, an admin in Spanish, and a member who is not told.
	admin, member := ids.New("u")+"@example.test", ids.New("u")+"@example.test"
	for _, u := range []struct{ email, role, locale string }{{admin, "admin", "es"}, {member, "member", "en"}} {
		if _, err := f.db.Exec(ctx, `INSERT INTO users (id, company_id, email, role, locale) VALUES ($1, $2, $3, $4, $5)`,
			ids.New(ids.User), f.co, u.email, u.role, u.locale); err != nil {
			t.Fatal(err)
		}
	}
	var owner string
	if err := f.db.QueryRow(ctx, `SELECT email FROM users WHERE company_id = $1 AND role = 'owner'`, f.co).Scan(&owner); err != nil {
		t.Fatal(err)
	}
	f.insert(t, stored{company: f.co, status: delivery.StatusFailed, created: t0})
	since, disabled := t0, t0.Add(5*24*time.Hour+time.Hour)
	for _, e := range []struct {
		kind, target, company string
		disabled              *time.Time
	}{{"webhook", f.wh, f.co, &disabled}, {"postback", f.peer, f.peer, nil}} { // the peer's is not disabled
		if _, err := f.db.Exec(ctx, `INSERT INTO delivery_endpoints (kind, target_id, company_id, failing_since, disabled_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $4)`, e.kind, e.target, e.company, since, e.disabled); err != nil {
			t.Fatal(err)
		}
	}

	n := delivery.Notices{DB: f.db, Mailer: m, BaseURL: "https://partners.example", Now: func() time.Time { return disabled.Add(time.Minute) }}
	var wg sync.WaitGroup
	for range 2 { // two api replicas at once
		wg.Go(func() {
			if err := n.Send(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	en := inbox.Wait(t, owner, 5*time.Second)
	if en.Subject != "PartnerStream disabled your webhook" || !strings.Contains(en.Text, "https://receiver.example/h") ||
		!strings.Contains(en.Text, "since 2026-03-01 12:00 UTC (5 days)") || !strings.Contains(en.Text, "https://partners.example/app/settings/webhooks") {
		t.Errorf("the owner's notice:\n%s\n%s", en.Subject, en.Text)
	}
	es := inbox.Wait(t, admin, 5*time.Second)
	if es.Subject != "PartnerStream desactivó tu webhook" || !strings.Contains(es.Text, "no ha aceptado ninguna entrega") {
		t.Errorf("the admin's notice in Spanish:\n%s\n%s", es.Subject, es.Text)
	}
	if err := n.Send(ctx); err != nil {
		t.Fatal(err)
	}
	if inbox.Count(owner) != 1 || inbox.Count(admin) != 1 || inbox.Count(member) != 0 {
		t.Errorf("notices: owner %d, admin %d, member %d; want 1, 1 and none", inbox.Count(owner), inbox.Count(admin), inbox.Count(member))
	}
}
