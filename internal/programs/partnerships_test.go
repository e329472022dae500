package programs_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/links"
	"github.com/partnerstream/partnerstream/internal/page"
	"github.com/partnerstream/partnerstream/internal/programs"
	"github.com/partnerstream/partnerstream/internal/store/pgstore"
	"github.com/partnerstream/partnerstream/internal/testenv/pgtest"
)

// partnershipIn creates a partnership on a new approval program and moves it to status
// through legal transitions.
func (e *env) partnershipIn(t *testing.T, status string) programs.Partnership {
	t.Helper()
	p := e.apply(t, e.aff, e.program(t, e.adv, programs.Approval, "").ID)
	path := map[string][]string{
		programs.Pending:   nil,
		programs.Approved:  {programs.Approved},
		programs.Rejected:  {programs.Rejected},
		programs.Suspended: {programs.Approved, programs.Suspended},
	}[status]
	for _, to := range path {
		var err error
		if p, err = e.svc.SetPartnershipStatus(e.ctx, e.adv, p.ID, to); err != nil {
			t.Fatalf("to %s: %v", to, err)
		}
	}
	return p
}

func TestEveryPartnershipTransition(t *testing.T) {
	e := newEnv(t)
	all := []string{programs.Pending, programs.Approved, programs.Rejected, programs.Suspended}
	legal := map[string][]string{
		programs.Pending:   {programs.Approved, programs.Rejected},
		programs.Approved:  {programs.Suspended},
		programs.Rejected:  {},
		programs.Suspended: {},
	}
	for _, from := range all {
		for _, to := range all {
			ok := slices.Contains(legal[from], to)
			name := from + " to " + to + " is refused"
			if ok {
				name = from + " to " + to + " is allowed"
			}
			t.Run(name, func(t *testing.T) {
				p := e.partnershipIn(t, from)
				e.clock.Advance(time.Minute)
				got, err := e.svc.SetPartnershipStatus(e.ctx, e.adv, p.ID, to)
				if ok {
					if err != nil || got.Status != to || !got.UpdatedAt.Equal(e.clock.Now()) || !got.UpdatedAt.After(p.UpdatedAt) {
						t.Fatalf("got %+v, %v", got, err)
					}
					return
				}
				var te *programs.TransitionError
				if !errors.As(err, &te) || te.From != from || te.To != to || te.Allowed == nil || !slices.Equal(te.Allowed, legal[from]) {
					t.Fatalf("err %v (%+v), want a transition error allowing %v", err, te, legal[from])
				}
				list, _, _ := e.svc.ListPartnerships(e.ctx, e.adv, programs.PartnershipFilter{ProgramID: p.ProgramID}, page.Request{Limit: 1})
				if list[0].Status != from || !list[0].UpdatedAt.Equal(p.UpdatedAt) {
					t.Fatalf("a refused transition changed the partnership: %+v", list[0])
				}
			})
		}
	}
	t.Run("an affiliate cannot decide", func(t *testing.T) {
		p := e.partnershipIn(t, programs.Pending)
		var forbidden *programs.ForbiddenError
		if _, err := e.svc.SetPartnershipStatus(e.ctx, e.aff, p.ID, programs.Approved); !errors.As(err, &forbidden) {
			t.Fatalf("err %v, want forbidden", err)
		}
	})
	t.Run("another advertiser cannot see it", func(t *testing.T) {
		p := e.partnershipIn(t, programs.Pending)
		if _, err := e.svc.SetPartnershipStatus(e.ctx, e.adv2, p.ID, programs.Approved); !errors.Is(err, programs.ErrNotFound) {
			t.Fatalf("err %v, want not found", err)
		}
	})
}

func TestApplyingToPublicAndApprovalPrograms(t *testing.T) {
	e := newEnv(t)
	pub := e.program(t, e.adv, programs.Public, "")
	appr := e.program(t, e.adv, programs.Approval, "")
	p, created, err := e.svc.Apply(e.ctx, e.aff, programs.ApplyInput{ProgramID: pub.ID, Message: "my blog"})
	if err != nil || !created || p.Status != programs.Approved || p.AdvertiserID != e.adv.CompanyID || p.AffiliateID != e.aff.CompanyID ||
		p.Message != "my blog" || p.Commission != nil || p.Currency != "EUR" || !p.CreatedAt.Equal(e.start) {
		t.Fatalf("public: %+v created=%v %v", p, created, err)
	}
	if p, _, _ := e.svc.Apply(e.ctx, e.aff, programs.ApplyInput{ProgramID: appr.ID}); p.Status != programs.Pending {
		t.Fatalf("approval program: %s, want pending", p.Status)
	}
}

func TestApplyingTwiceReturnsTheFirstPartnership(t *testing.T) {
	e := newEnv(t)
	prog := e.program(t, e.adv, programs.Approval, "")
	first := e.apply(t, e.aff, prog.ID)
	again, created, err := e.svc.Apply(e.ctx, e.aff, programs.ApplyInput{ProgramID: prog.ID, Message: "other"})
	if err != nil || created || !reflect.DeepEqual(again, first) {
		t.Fatalf("again: %+v created=%v %v, want %+v", again, created, err, first)
	}
	// Rejected and on a paused program: still the same partnership, not a 404.
	if _, err := e.svc.SetPartnershipStatus(e.ctx, e.adv, first.ID, programs.Rejected); err != nil {
		t.Fatal(err)
	}
	setStatus(t, e, prog.ID, programs.ProgramPaused)
	if again, created, err = e.svc.Apply(e.ctx, e.aff, programs.ApplyInput{ProgramID: prog.ID}); err != nil || created || again.ID != first.ID || again.Status != programs.Rejected {
		t.Fatalf("after rejection: %+v created=%v %v", again, created, err)
	}

	t.Run("concurrent applications make one partnership and one event", func(t *testing.T) {
		prog := e.program(t, e.adv, programs.Public, "")
		var wg sync.WaitGroup
		results := make([]programs.Partnership, 8)
		createdN := make([]bool, 8)
		for i := range results {
			wg.Go(func() {
				var err error
				results[i], createdN[i], err = e.svc.Apply(e.ctx, e.aff2, programs.ApplyInput{ProgramID: prog.ID})
				if err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		n := 0
		for i, r := range results {
			if r.ID != results[0].ID {
				t.Fatalf("application %d got %s, another got %s", i, r.ID, results[0].ID)
			}
			if createdN[i] {
				n++
			}
		}
		if n != 1 || countOutbox(t, e, results[0].ID) != 1 {
			t.Fatalf("%d applications reported created, %d events, want 1 and 1", n, countOutbox(t, e, results[0].ID))
		}
	})
}

func TestApplyRules(t *testing.T) {
	e := newEnv(t)
	paused := e.program(t, e.adv, programs.Public, programs.ProgramPaused)
	active := e.program(t, e.adv, programs.Approval, "")
	var forbidden *programs.ForbiddenError
	cases := []struct {
		name  string
		who   programs.Actor
		in    programs.ApplyInput
		check func(err error) bool
	}{
		{"an advertiser cannot apply", e.adv, programs.ApplyInput{ProgramID: active.ID}, func(err error) bool { return errors.As(err, &forbidden) }},
		{"an affiliate member cannot apply", e.affMember, programs.ApplyInput{ProgramID: active.ID}, func(err error) bool { return errors.As(err, &forbidden) }},
		{"a program the affiliate cannot see is not found", e.aff, programs.ApplyInput{ProgramID: paused.ID}, func(err error) bool { return errors.Is(err, programs.ErrNotFound) }},
		{"an unknown program is not found", e.aff, programs.ApplyInput{ProgramID: "prg_00000000000000000000000000"}, func(err error) bool { return errors.Is(err, programs.ErrNotFound) }},
		{"a malformed program id is invalid", e.aff, programs.ApplyInput{ProgramID: "123"}, func(err error) bool { return fields(t, err)[0] == "program_id" }},
		{"a message over 2000 characters is invalid", e.aff, programs.ApplyInput{ProgramID: active.ID, Message: strings.Repeat("x", 2001)}, func(err error) bool { return fields(t, err)[0] == "message" }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := e.svc.Apply(e.ctx, c.who, c.in)
			if !c.check(err) {
				t.Fatalf("err = %v", err)
			}
		})
	}
	if n := countOutbox(t, e, ""); n != 0 {
		t.Fatalf("refused applications wrote %d events", n)
	}
}

func countOutbox(t *testing.T, e *env, aggregateID string) int {
	t.Helper()
	var n int
	if err := e.db.QueryRow(e.ctx, `SELECT count(*) FROM outbox WHERE $1 = '' OR aggregate_id = $1`, aggregateID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestPartnershipCreatedGoesToTheOutboxInTheSameTransaction(t *testing.T) {
	e := newEnv(t)
	prog := e.program(t, e.adv, programs.Public, "")
	p := e.apply(t, e.aff, prog.ID)

	var typ, aggregate string
	var raw []byte
	if err := e.db.QueryRow(e.ctx, `SELECT type, aggregate_id, envelope FROM outbox`).Scan(&typ, &aggregate, &raw); err != nil {
		t.Fatal(err)
	}
	var env events.Envelope
	if err := json.Unmarshal(raw, &env); err != nil {
		t.Fatal(err)
	}
	if typ != events.PartnershipCreated || aggregate != p.ID || env.Type != events.PartnershipCreated || !strings.HasPrefix(env.ID, "evt_") ||
		env.AdvertiserID != e.adv.CompanyID || env.AffiliateID != e.aff.CompanyID || env.ProgramID != prog.ID || !env.OccurredAt.Equal(e.start) {
		t.Fatalf("outbox row %s %s %s", typ, aggregate, raw)
	}
	want := `{"id":"` + p.ID + `","type":"partnership","amount":"0.00","status":"approved","currency":"EUR","program_id":"` + prog.ID +
		`","affiliate_id":"` + e.aff.CompanyID + `","advertiser_id":"` + e.adv.CompanyID + `","created_at":"2026-03-01T12:00:00Z"}`
	if string(env.Data) != want {
		t.Fatalf("data\n %s\nwant\n %s", env.Data, want)
	}

	// A failure after the outbox insert must take the event with the partnership: here the
	// partnership's deferred constraint fails at commit, after every statement ran. An event
	// written outside the change's transaction would survive it.
	if _, err := e.db.Exec(e.ctx, `
		CREATE FUNCTION fail_commit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'commit refused'; END $$;
		CREATE CONSTRAINT TRIGGER fail_commit AFTER INSERT ON partnerships DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION fail_commit();`); err != nil {
		t.Fatal(err)
	}
	other := e.program(t, e.adv, programs.Public, "")
	if _, _, err := e.svc.Apply(e.ctx, e.aff, programs.ApplyInput{ProgramID: other.ID}); err == nil || !strings.Contains(err.Error(), "commit refused") {
		t.Fatalf("apply with a failing commit: %v", err)
	}
	var partnerships int
	if err := e.db.QueryRow(e.ctx, `SELECT count(*) FROM partnerships WHERE program_id = $1`, other.ID).Scan(&partnerships); err != nil {
		t.Fatal(err)
	}
	if n := countOutbox(t, e, ""); n != 1 || partnerships != 0 {
		t.Fatalf("after the failed commit: %d events (want the first only), %d partnerships (want 0)", n, partnerships)
	}
}

// listen subscribes to the link channel the way the link caches do; the function it returns
// gives the next notification.
func listen(t *testing.T, e *env) func() string {
	t.Helper()
	payloads := make(chan string, 1024)
	pgtest.Listen(t, e.db, pgstore.Subscription{Channel: links.ChangedChannel, Notify: func(p string) { payloads <- p }, Reset: func() {}})
	return func() string {
		t.Helper()
		select {
		case p := <-payloads:
			return p
		case <-time.After(5 * time.Second):
			t.Fatal("no notification within 5 s")
			return ""
		}
	}
}

func TestChangesThatAffectLinksNotifyTheLinkCaches(t *testing.T) {
	e := newEnv(t)
	next := listen(t, e)
	quiet := e.program(t, e.adv, programs.Public, "")
	marker := e.program(t, e.adv, programs.Public, "")
	// Notifications arrive in commit order: after a change that must stay silent, a change
	// of the marker program must be the next notification.
	expectNothingThen := func(t *testing.T) {
		t.Helper()
		setStatus(t, e, marker.ID, programs.ProgramPaused)
		setStatus(t, e, marker.ID, programs.ProgramActive)
		for range 2 {
			if got := next(); got != "program:"+marker.ID {
				t.Fatalf("notification %q, want only the marker's", got)
			}
		}
	}
	patch := func(t *testing.T, id, body string) {
		t.Helper()
		var pp programs.ProgramPatch
		mustJSON(t, body, &pp)
		if _, err := e.svc.UpdateProgram(e.ctx, e.adv, id, pp); err != nil {
			t.Fatal(err)
		}
	}
	for _, body := range []string{`{"status":"paused"}`, `{"landing_url":"https://new.example.com/"}`, `{"click_param":"cid"}`} {
		t.Run(body+" notifies", func(t *testing.T) {
			patch(t, quiet.ID, body)
			if got := next(); got != "program:"+quiet.ID {
				t.Fatalf("notification %q", got)
			}
		})
	}
	t.Run("a name change does not notify", func(t *testing.T) {
		patch(t, quiet.ID, `{"name":"Renamed","commission":{"type":"fixed","amount":"9.00"}}`)
		expectNothingThen(t)
	})
	t.Run("approving and suspending a partnership notify", func(t *testing.T) {
		p := e.partnershipIn(t, programs.Pending)
		for _, to := range []string{programs.Approved, programs.Suspended} {
			if _, err := e.svc.SetPartnershipStatus(e.ctx, e.adv, p.ID, to); err != nil {
				t.Fatal(err)
			}
			if got := next(); got != "program:"+p.ProgramID {
				t.Fatalf("notification %q", got)
			}
		}
	})
	t.Run("a refused transition does not notify", func(t *testing.T) {
		p := e.partnershipIn(t, programs.Rejected)
		next() // the rejection's
		if _, err := e.svc.SetPartnershipStatus(e.ctx, e.adv, p.ID, programs.Approved); err == nil {
			t.Fatal("rejected -> approved was allowed")
		}
		expectNothingThen(t)
	})
	t.Run("a promotion change notifies", func(t *testing.T) {
		pr, err := e.svc.CreatePromotion(e.ctx, e.adv, quiet.ID, programs.PromotionInput{Title: "Sale"})
		if err != nil {
			t.Fatal(err)
		}
		var pp programs.PromotionPatch
		mustJSON(t, `{"landing_url":"https://shop.example.com/sale"}`, &pp)
		if _, err := e.svc.UpdatePromotion(e.ctx, e.adv, pr.ID, pp); err != nil {
			t.Fatal(err)
		}
		if got := next(); got != "program:"+quiet.ID {
			t.Fatalf("notification %q", got)
		}
	})
}

func TestCommissionOverride(t *testing.T) {
	e := newEnv(t)
	p := e.partnershipIn(t, programs.Approved)
	set := func(who programs.Actor, body string) (programs.Partnership, error) {
		var pp programs.PartnershipPatch
		mustJSON(t, body, &pp)
		return e.svc.UpdatePartnership(e.ctx, who, p.ID, pp)
	}
	e.clock.Set(e.start.Add(time.Hour))
	got, err := set(e.adv, `{"commission":{"type":"fixed","amount":"2.5"}}`)
	if err != nil || *got.Commission != (programs.Rule{Type: programs.Fixed, Value: 250, Currency: "EUR"}) || !got.UpdatedAt.Equal(e.clock.Now()) || got.Status != programs.Approved {
		t.Fatalf("fixed override: %+v %v", got, err)
	}
	if got, err = set(e.adv, `{"commission":{"type":"percent","percent":"20"}}`); err != nil || got.Commission.Value != 2000 {
		t.Fatalf("percent override: %+v %v", got, err)
	}
	if got, err = set(e.adv, `{"commission":null}`); err != nil || got.Commission != nil {
		t.Fatalf("clear override: %+v %v", got, err)
	}
	if _, err = set(e.adv, `{"commission":{"type":"fixed","amount":"2.505"}}`); fields(t, err)[0] != "commission.amount" {
		t.Fatalf("3 decimals in EUR accepted")
	}
	var forbidden *programs.ForbiddenError
	if _, err = set(e.aff, `{"commission":null}`); !errors.As(err, &forbidden) {
		t.Fatalf("affiliate override: %v", err)
	}
	if _, err = set(e.adv2, `{"commission":null}`); !errors.Is(err, programs.ErrNotFound) {
		t.Fatalf("foreign override: %v", err)
	}
}

func TestPartnershipListsAreScopedAndFiltered(t *testing.T) {
	e := newEnv(t)
	pending := e.partnershipIn(t, programs.Pending)
	approved := e.partnershipIn(t, programs.Approved)
	otherProg := e.program(t, e.adv2, programs.Public, "")
	foreign := e.apply(t, e.aff2, otherProg.ID)
	list := func(a programs.Actor, f programs.PartnershipFilter) []string {
		l, _, err := e.svc.ListPartnerships(e.ctx, a, f, page.Request{Limit: 50})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, p := range l {
			out = append(out, p.ID)
		}
		return out
	}
	cases := []struct {
		name string
		who  programs.Actor
		f    programs.PartnershipFilter
		want []string
	}{
		{"an affiliate lists its own, newest first", e.aff, programs.PartnershipFilter{}, []string{approved.ID, pending.ID}},
		{"an advertiser lists its programs' partnerships", e.adv, programs.PartnershipFilter{}, []string{approved.ID, pending.ID}},
		{"the status filter applies", e.adv, programs.PartnershipFilter{Status: programs.Pending}, []string{pending.ID}},
		{"the program filter applies", e.aff, programs.PartnershipFilter{ProgramID: approved.ProgramID}, []string{approved.ID}},
		{"another affiliate lists only its own", e.aff2, programs.PartnershipFilter{}, []string{foreign.ID}},
		{"another advertiser's program filter finds nothing", e.adv, programs.PartnershipFilter{ProgramID: otherProg.ID}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := list(c.who, c.f); !slices.Equal(got, c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
	_, _, err := e.svc.ListPartnerships(e.ctx, e.adv, programs.PartnershipFilter{Status: "gone", ProgramID: "x"}, page.Request{Limit: 5})
	if got := fields(t, err); !slices.Equal(got, []string{"status", "program_id"}) {
		t.Fatalf("bad filters: %v", got)
	}
}
