package conversions_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/conversions"
	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/ids"
)

// inStatus registers a conversion for a fresh affiliate (so payouts gather only it) and
// brings its commission to status the legal way.
func (e *env) inStatus(t *testing.T, status string) conversions.Conversion {
	t.Helper()
	ctx := context.Background()
	aff := e.company(t, "affiliate")
	e.partner(t, e.program, aff, "", 0)
	now := e.clock.Now()
	c, _, err := e.svc.Register(ctx, e.adv, conversions.NewConversion{ClickID: e.click(t, e.program, aff, now.Add(-time.Hour)),
		ExternalID: ids.New("ord"), Amount: "10.00", OccurredAt: now.Add(-time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	step := func(to string) {
		if c, err = e.svc.ChangeStatus(ctx, e.adv, c.ID, to, ""); err != nil {
			t.Fatalf("to %s: %v", to, err)
		}
	}
	switch status {
	case conversions.Pending:
	case conversions.Approved, conversions.Rejected:
		step(status)
	case conversions.Reversed:
		step(conversions.Approved)
		step(conversions.Reversed)
	case conversions.Paid:
		step(conversions.Approved)
		p := e.payout(t, aff, "EUR")
		if _, err := e.svc.SettlePayout(ctx, e.adv, p.ID, conversions.PayoutPaid); err != nil {
			t.Fatal(err)
		}
		if c, err = e.svc.Get(ctx, conversions.Viewer{CompanyID: e.adv}, c.ID); err != nil {
			t.Fatal(err)
		}
	}
	if c.Commission.Status != status {
		t.Fatalf("set up %s, got %s", status, c.Commission.Status)
	}
	return c
}

// payout gathers the affiliate's approved commissions of the last day.
func (e *env) payout(t *testing.T, affiliate, currency string) conversions.Payout {
	t.Helper()
	now := e.clock.Now()
	p, err := e.svc.CreatePayout(context.Background(), e.adv, conversions.NewPayout{AffiliateID: affiliate, Currency: currency,
		PeriodStart: now.Add(-24 * time.Hour), PeriodEnd: now})
	if err != nil {
		t.Fatalf("CreatePayout: %v", err)
	}
	return p
}

func TestEveryLegalAndIllegalTransition(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	targets := []string{conversions.Approved, conversions.Rejected, conversions.Reversed}
	legal := map[[2]string]bool{
		{conversions.Pending, conversions.Approved}:  true,
		{conversions.Pending, conversions.Rejected}:  true,
		{conversions.Approved, conversions.Reversed}: true,
	}
	for _, from := range conversions.Statuses {
		for _, to := range targets {
			ok := legal[[2]string{from, to}]
			t.Run(fmt.Sprintf("%s to %s is legal: %v", from, to, ok), func(t *testing.T) {
				c := e.inStatus(t, from)
				before := e.outboxFor(t, c.ID)
				got, err := e.svc.ChangeStatus(ctx, e.adv, c.ID, to, "customer returned it")
				after := e.outboxFor(t, c.ID)
				if !ok {
					var te *conversions.TransitionError
					if !errors.As(err, &te) || te.From != from || te.To != to || !slices.Equal(te.Allowed, conversions.Allowed(from)) {
						t.Fatalf("ChangeStatus = %v, want a TransitionError listing %v", err, conversions.Allowed(from))
					}
					stored, _ := e.svc.Get(ctx, conversions.Viewer{CompanyID: e.adv}, c.ID)
					if stored.Commission.Status != from || stored.Commission.Version != c.Commission.Version || len(after) != len(before) {
						t.Fatalf("a refused transition changed something: %s v%d, %d new events", stored.Commission.Status,
							stored.Commission.Version, len(after)-len(before))
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if got.Commission.Status != to || got.Commission.Version != c.Commission.Version+1 {
					t.Fatalf("status %s v%d, want %s v%d", got.Commission.Status, got.Commission.Version, to, c.Commission.Version+1)
				}
				assertEvents(t, after[len(before):], from, got)
			})
		}
	}
	t.Run("paid is reached only through a payout", func(t *testing.T) {
		for _, from := range conversions.Statuses {
			c := e.inStatus(t, from)
			if _, err := e.svc.ChangeStatus(ctx, e.adv, c.ID, conversions.Paid, ""); !errors.Is(err, conversions.ErrPaidByPayout) {
				t.Fatalf("ChangeStatus(%s -> paid) = %v, want ErrPaidByPayout", from, err)
			}
		}
		// Only approved commissions are gathered, so a payout pays nothing else.
		for _, from := range []string{conversions.Pending, conversions.Rejected, conversions.Reversed, conversions.Paid} {
			c := e.inStatus(t, from)
			_, err := e.svc.CreatePayout(ctx, e.adv, conversions.NewPayout{AffiliateID: c.AffiliateID, Currency: "EUR",
				PeriodStart: c.OccurredAt.Add(-time.Hour), PeriodEnd: c.OccurredAt.Add(time.Hour)})
			if !errors.Is(err, conversions.ErrNoCommissions) {
				t.Fatalf("a payout of a %s commission: %v, want ErrNoCommissions", from, err)
			}
		}
	})
	t.Run("an unknown or foreign conversion is not found", func(t *testing.T) {
		c := e.inStatus(t, conversions.Pending)
		other := e.company(t, "advertiser")
		for _, tc := range []struct{ adv, id string }{{e.adv, ids.New(ids.Conversion)}, {other, c.ID}} {
			if _, err := e.svc.ChangeStatus(ctx, tc.adv, tc.id, conversions.Approved, ""); !errors.Is(err, conversions.ErrNotFound) {
				t.Fatalf("ChangeStatus = %v, want ErrNotFound", err)
			}
		}
	})
}

// assertEvents checks the outbox rows of one change of c's commission from previous.
func assertEvents(t *testing.T, got []outboxEvent, previous string, c conversions.Conversion) {
	t.Helper()
	want := []string{events.CommissionStatusChanged}
	switch c.Commission.Status {
	case conversions.Approved:
		want = []string{events.ConversionApproved, events.CommissionStatusChanged}
	case conversions.Rejected:
		want = []string{events.ConversionRejected, events.CommissionStatusChanged}
	}
	var types []string
	for _, ev := range got {
		types = append(types, ev.envelope.Type)
		d := ev.data
		if d.ID != c.ID || d.Status != c.Commission.Status || d.PreviousStatus != previous || d.Version != c.Commission.Version ||
			d.CommissionID != c.Commission.ID || ev.aggregate != c.ID || !ev.envelope.OccurredAt.Equal(c.Commission.UpdatedAt) {
			t.Errorf("%s event data %+v, want %s -> %s v%d", ev.envelope.Type, d, previous, c.Commission.Status, c.Commission.Version)
		}
	}
	if !slices.Equal(types, want) {
		t.Fatalf("events %v, want %v", types, want)
	}
}

func TestBulkDecisionsAreAllOrNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		to      string
		blocked string // a status that cannot become to
		reason  string
		decide  func(ids []string) ([]conversions.Conversion, error)
	}{
		{"approving many", conversions.Approved, conversions.Rejected, "", func(ids []string) ([]conversions.Conversion, error) {
			return e.svc.ApproveMany(ctx, e.adv, ids)
		}},
		{"rejecting many", conversions.Rejected, conversions.Approved, "fraud ring", func(ids []string) ([]conversions.Conversion, error) {
			return e.svc.RejectMany(ctx, e.adv, ids, "fraud ring")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var pending []string
			for range 3 {
				pending = append(pending, e.inStatus(t, conversions.Pending).ID)
			}
			blocked := e.inStatus(t, tc.blocked)
			foreign := e.inStatus(t, conversions.Pending)
			other := e.company(t, "advertiser")
			missing := ids.New(ids.Conversion)
			written := func() int {
				return e.count(t, `SELECT count(*) FROM outbox WHERE aggregate_id = ANY($1)`, append(slices.Clone(pending), foreign.ID))
			}
			before := written()

			_, err := tc.decide(append(slices.Clone(pending), blocked.ID, missing))
			var be *conversions.BulkError
			if !errors.As(err, &be) || be.To != tc.to {
				t.Fatalf("= %v, want a BulkError to %s", err, tc.to)
			}
			want := []conversions.Failure{
				{ID: blocked.ID, Code: "invalid_transition", Status: tc.blocked, Allowed: conversions.Allowed(tc.blocked)},
				{ID: missing, Code: "not_found"},
			}
			if len(be.Failures) != 2 || be.Failures[0].ID != want[0].ID || be.Failures[0].Code != want[0].Code ||
				be.Failures[0].Status != want[0].Status || !slices.Equal(be.Failures[0].Allowed, want[0].Allowed) ||
				be.Failures[1].ID != want[1].ID || be.Failures[1].Code != want[1].Code {
				t.Fatalf("failures %+v, want %+v", be.Failures, want)
			}
			if n := e.count(t, `SELECT count(*) FROM commissions WHERE conversion_id = ANY($1) AND status <> 'pending'`, pending); n != 0 {
				t.Fatalf("%d commissions changed by a failed bulk request", n)
			}
			if n := written() - before; n != 0 {
				t.Fatalf("%d events written by a failed bulk request", n)
			}

			// Another advertiser's conversion is not found, and stays pending.
			_, err = e.svc.RejectMany(ctx, other, []string{foreign.ID}, "")
			if !errors.As(err, &be) || len(be.Failures) != 1 || be.Failures[0].Code != "not_found" {
				t.Fatalf("another advertiser's decision = %v, want its id not found", err)
			}
			if _, err = e.svc.ApproveMany(ctx, other, []string{foreign.ID}); !errors.As(err, &be) || be.Failures[0].Code != "not_found" {
				t.Fatalf("another advertiser's decision = %v, want its id not found", err)
			}
			if n := written() - before; n != 0 {
				t.Fatalf("%d events written for another advertiser's decision", n)
			}

			got, err := tc.decide(pending)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(pending) {
				t.Fatalf("%d results for %d ids", len(got), len(pending))
			}
			for i, c := range got {
				if c.ID != pending[i] || c.Commission.Status != tc.to || c.Commission.Reason != tc.reason || c.Commission.Version != 2 {
					t.Fatalf("result %d: %s %s %q v%d", i, c.ID, c.Commission.Status, c.Commission.Reason, c.Commission.Version)
				}
				stored, err := e.svc.Get(ctx, conversions.Viewer{CompanyID: e.adv}, c.ID)
				if err != nil || stored.Commission.Status != tc.to || stored.Commission.Reason != tc.reason {
					t.Fatalf("stored %s %q (%v), want %s %q", stored.Commission.Status, stored.Commission.Reason, err, tc.to, tc.reason)
				}
				assertEvents(t, e.outboxFor(t, c.ID)[2:], conversions.Pending, c)
			}

			tooMany := make([]string, conversions.MaxBulk+1)
			for i := range tooMany {
				tooMany[i] = ids.New(ids.Conversion)
			}
			for name, list := range map[string][]string{"none": nil, "101": tooMany, "a duplicate": {pending[0], pending[0]}} {
				var inv *conversions.InvalidError
				if _, err := tc.decide(list); !errors.As(err, &inv) || inv.Field != "ids" {
					t.Errorf("%s: %v, want an invalid ids", name, err)
				}
			}
		})
	}
	t.Run("a bulk rejection's reason is checked like one rejection's", func(t *testing.T) {
		c := e.inStatus(t, conversions.Pending)
		var inv *conversions.InvalidError
		if _, err := e.svc.RejectMany(ctx, e.adv, []string{c.ID}, strings.Repeat("x", conversions.MaxReason+1)); !errors.As(err, &inv) || inv.Field != "reason" {
			t.Fatalf("RejectMany with a long reason = %v, want an invalid reason", err)
		}
		if stored, _ := e.svc.Get(ctx, conversions.Viewer{CompanyID: e.adv}, c.ID); stored.Commission.Status != conversions.Pending {
			t.Fatalf("a refused rejection left %s", stored.Commission.Status)
		}
	})
}

func TestPendingCommissionsAreApprovedAfterTheHold(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	hold := 14
	program := e.newProgram(t, e.adv, "EUR", "fixed", 500, &hold)
	e.partner(t, program, e.aff, "", 0)
	noHold := e.newProgram(t, e.adv, "EUR", "fixed", 500, nil)
	e.partner(t, noHold, e.aff, "", 0)
	start := e.clock.Now()
	reg := func(program string) conversions.Conversion {
		c, _, err := e.svc.Register(ctx, e.adv, conversions.NewConversion{ClickID: e.click(t, program, e.aff, e.clock.Now().Add(-time.Minute)),
			ExternalID: ids.New("ord")})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	first := reg(program)
	if first.Commission.HoldUntil == nil || !first.Commission.HoldUntil.Equal(start.Add(14*24*time.Hour)) {
		t.Fatalf("hold_until %v, want 14 days after registration", first.Commission.HoldUntil)
	}
	manual := reg(noHold)
	if manual.Commission.HoldUntil != nil {
		t.Fatalf("a program without hold days set hold_until %v", manual.Commission.HoldUntil)
	}
	e.clock.Set(start.Add(24 * time.Hour))
	second := reg(program)
	rejected := reg(program)
	if _, err := e.svc.ChangeStatus(ctx, e.adv, rejected.ID, conversions.Rejected, "fraud"); err != nil {
		t.Fatal(err)
	}

	steps := []struct {
		at       time.Time
		approved int
		want     map[string]string
	}{
		{start.Add(14*24*time.Hour - time.Second), 0, map[string]string{first.ID: "pending", second.ID: "pending"}},
		{start.Add(14 * 24 * time.Hour), 1, map[string]string{first.ID: "approved", second.ID: "pending"}},
		{start.Add(15 * 24 * time.Hour), 1, map[string]string{first.ID: "approved", second.ID: "approved", rejected.ID: "rejected"}},
		{start.Add(400 * 24 * time.Hour), 0, map[string]string{manual.ID: "pending"}},
	}
	for _, s := range steps {
		n, err := e.svc.ApproveDue(ctx, s.at)
		if err != nil || n != s.approved {
			t.Fatalf("ApproveDue(%v) = %d, %v; want %d", s.at, n, err, s.approved)
		}
		for id, status := range s.want {
			c, _ := e.svc.Get(ctx, conversions.Viewer{CompanyID: e.adv}, id)
			if c.Commission.Status != status {
				t.Fatalf("at %v %s is %s, want %s", s.at, id, c.Commission.Status, status)
			}
		}
	}
	c, _ := e.svc.Get(ctx, conversions.Viewer{CompanyID: e.adv}, first.ID)
	assertEvents(t, e.outboxFor(t, first.ID)[2:], conversions.Pending, c)
}

func TestAutoApprovalRunsInBatchesAndSkipsWhatAnotherReplicaHolds(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	// 250 commissions whose hold ended: more than one batch.
	const due = 250
	for _, clk := range e.clicks(t, e.program, e.aff, e.clock.Now().Add(-time.Hour), due) {
		if _, _, err := e.svc.Register(ctx, e.adv, conversions.NewConversion{ClickID: clk, ExternalID: clk}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.db.Exec(ctx, `UPDATE commissions SET hold_until = $1`, e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	// Two replicas at once approve each commission once.
	var n1, n2 int
	var err1, err2 error
	done := make(chan struct{})
	go func() { n1, err1 = e.svc.ApproveDue(ctx, e.clock.Now()); close(done) }()
	n2, err2 = e.svc.ApproveDue(ctx, e.clock.Now())
	<-done
	if err1 != nil || err2 != nil || n1+n2 != due {
		t.Fatalf("replicas approved %d + %d (%v, %v), want %d in all", n1, n2, err1, err2, due)
	}
	if n := e.count(t, `SELECT count(*) FROM outbox WHERE type = 'conversion.approved'`); n != due {
		t.Fatalf("%d approval events, want %d", n, due)
	}
}

func TestTheAutoApprovalJobApprovesWhatIsDue(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.register(t, "order-1", "10")
	if _, err := e.db.Exec(context.Background(), `UPDATE commissions SET hold_until = $1`, e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- conversions.AutoApproval{Service: e.svc, Interval: 10 * time.Millisecond, Log: quiet}.Run(ctx)
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := e.svc.Get(context.Background(), conversions.Viewer{CompanyID: e.adv}, c.ID)
		if err == nil && got.Commission.Status == conversions.Approved {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not approved after 5 s: %s %v", got.Commission.Status, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
