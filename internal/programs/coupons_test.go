package programs_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/page"
	"github.com/partnerstream/partnerstream/internal/programs"
)

func TestCustomerTermsAndRecurringRulesAreKept(t *testing.T) {
	e := newEnv(t)
	p := e.program(t, e.adv, "", "")
	if p.AttributionRule != programs.FirstAffiliate || p.CustomerWindowDays != nil || p.Commission.Recurring != nil {
		t.Fatalf("defaults: %+v", p)
	}
	var pp programs.ProgramPatch
	mustJSON(t, `{"attribution_rule":"last_click","customer_window_days":90,"commission":{"type":"percent","percent":"20","recurring":{"months":12}}}`, &pp)
	got, err := e.svc.UpdateProgram(e.ctx, e.adv, p.ID, pp)
	if err != nil || got.AttributionRule != programs.LastClick || *got.CustomerWindowDays != 90 || *got.Commission.Recurring != (programs.Recurring{Months: 12}) {
		t.Fatalf("patched: %+v %v", got, err)
	}
	read, err := e.svc.Program(e.ctx, e.adv, p.ID)
	if err != nil || *read.Commission.Recurring != (programs.Recurring{Months: 12}) || *read.CustomerWindowDays != 90 || read.AttributionRule != programs.LastClick {
		t.Fatalf("read back: %+v %v", read, err)
	}
	if b, _ := read.Commission.MarshalJSON(); string(b) != `{"type":"percent","percent":"20.00","recurring":{"months":12}}` {
		t.Fatalf("rule JSON %s", b)
	}
	var lp programs.ProgramPatch
	mustJSON(t, `{"customer_window_days":null,"commission":{"type":"fixed","amount":"3","recurring":{"lifetime":true}}}`, &lp)
	if got, err = e.svc.UpdateProgram(e.ctx, e.adv, p.ID, lp); err != nil || got.CustomerWindowDays != nil || !got.Commission.Recurring.Lifetime {
		t.Fatalf("lifetime: %+v %v", got, err)
	}
	// A partnership's override carries its own recurring part.
	ptn := e.partnershipIn(t, programs.Approved)
	var op programs.PartnershipPatch
	mustJSON(t, `{"commission":{"type":"fixed","amount":"1","recurring":{"months":3}}}`, &op)
	if got, err := e.svc.UpdatePartnership(e.ctx, e.adv, ptn.ID, op); err != nil || got.Commission.Recurring.Months != 3 {
		t.Fatalf("override: %+v %v", got, err)
	}
	list, _, err := e.svc.ListPartnerships(e.ctx, e.aff, programs.PartnershipFilter{ProgramID: ptn.ProgramID}, page.Request{Limit: 5})
	if err != nil || len(list) != 1 || list[0].Commission.Recurring.Months != 3 {
		t.Fatalf("override read back: %+v %v", list, err)
	}
}

func TestCouponCodesAreUniquePerAdvertiserWhateverTheirCase(t *testing.T) {
	e := newEnv(t)
	a := e.partnershipIn(t, programs.Approved)
	b := e.partnershipIn(t, programs.Approved)
	create := func(who programs.Actor, ptn, code string) (programs.CouponCode, error) {
		return e.svc.CreateCouponCode(e.ctx, who, ptn, programs.CouponCodeInput{Code: code})
	}
	k, err := create(e.adv, a.ID, "Spring-20")
	if err != nil || k.Code != "Spring-20" || k.PartnershipID != a.ID || k.AffiliateID != a.AffiliateID || k.ProgramID != a.ProgramID {
		t.Fatalf("create: %+v %v", k, err)
	}
	var conflict *programs.ConflictError
	for _, ptn := range []string{a.ID, b.ID} {
		if _, err := create(e.adv, ptn, "SPRING-20"); !errors.As(err, &conflict) || conflict.Field != "code" {
			t.Fatalf("the same code in another case on %s: %v", ptn, err)
		}
	}
	// Another advertiser's codes are its own business.
	other := e.apply(t, e.aff2, e.program(t, e.adv2, programs.Public, "").ID)
	if _, err := create(e.adv2, other.ID, "spring-20"); err != nil {
		t.Fatalf("another advertiser's same code: %v", err)
	}
	for _, bad := range []string{"", "two words", strings.Repeat("x", 65), "ünï"} {
		if _, err := create(e.adv, a.ID, bad); !slices.Equal(fields(t, err), []string{"code"}) {
			t.Fatalf("code %q accepted", bad)
		}
	}
	if _, err := create(e.adv, a.ID, strings.Repeat("x", 64)); err != nil {
		t.Fatalf("64 characters: %v", err)
	}
	var forbidden *programs.ForbiddenError
	for _, who := range []programs.Actor{e.aff, e.advMember} {
		if _, err := create(who, a.ID, "NEW"); !errors.As(err, &forbidden) {
			t.Fatalf("%+v created a code: %v", who, err)
		}
	}
	if _, err := create(e.adv2, a.ID, "NEW"); !errors.Is(err, programs.ErrNotFound) {
		t.Fatalf("another advertiser's partnership: %v", err)
	}

	e.clock.Advance(time.Second)
	second, _ := create(e.adv, a.ID, "AUTUMN")
	for _, who := range []programs.Actor{e.adv, e.aff, e.affMember} {
		list, _, err := e.svc.ListCouponCodes(e.ctx, who, a.ID, page.Request{Limit: 50})
		if err != nil || len(list) != 3 || list[0].ID != second.ID {
			t.Fatalf("%+v lists %+v %v", who, list, err)
		}
	}
	for _, who := range []programs.Actor{e.adv2, e.aff2} {
		if _, _, err := e.svc.ListCouponCodes(e.ctx, who, a.ID, page.Request{Limit: 50}); !errors.Is(err, programs.ErrNotFound) {
			t.Fatalf("%+v listed another's codes: %v", who, err)
		}
	}
}
