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

func TestPromotionInputIsValidated(t *testing.T) {
	e := newEnv(t)
	prog := e.program(t, e.adv, programs.Public, "")
	cases := []struct {
		name  string
		in    programs.PromotionInput
		field string
	}{
		{"a title alone is valid", programs.PromotionInput{Title: "Sale"}, ""},
		{"every field set is valid", programs.PromotionInput{Title: "Sale", LandingURL: ptr("http://other.example.org/sale"), CouponCode: ptr("SPRING-10"),
			StartsAt: ptr("2026-03-01T00:00:00Z"), EndsAt: ptr("2026-03-31T00:00:00+02:00")}, ""},
		{"empty strings are none", programs.PromotionInput{Title: "Sale", LandingURL: ptr(""), CouponCode: ptr(""), StartsAt: ptr(""), EndsAt: ptr("")}, ""},
		{"an empty title is refused", programs.PromotionInput{Title: " "}, "title"},
		{"a non-http landing URL is refused", programs.PromotionInput{Title: "x", LandingURL: ptr("javascript:alert(1)")}, "landing_url"},
		{"a coupon over 64 characters is refused", programs.PromotionInput{Title: "x", CouponCode: ptr(strings.Repeat("C", 65))}, "coupon_code"},
		{"a coupon with a space is refused", programs.PromotionInput{Title: "x", CouponCode: ptr("SAVE 10")}, "coupon_code"},
		{"a date that is not RFC 3339 is refused", programs.PromotionInput{Title: "x", StartsAt: ptr("01/03/2026")}, "starts_at"},
		{"an end before the start is refused", programs.PromotionInput{Title: "x", StartsAt: ptr("2026-03-02T00:00:00Z"), EndsAt: ptr("2026-03-01T00:00:00Z")}, "ends_at"},
		{"an end equal to the start is refused", programs.PromotionInput{Title: "x", StartsAt: ptr("2026-03-02T00:00:00Z"), EndsAt: ptr("2026-03-02T00:00:00Z")}, "ends_at"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := e.svc.CreatePromotion(e.ctx, e.adv, prog.ID, c.in)
			if c.field == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if got := fields(t, err); !slices.Contains(got, c.field) {
				t.Fatalf("fields %v, want %s", got, c.field)
			}
		})
	}
	t.Run("another advertiser's program is not found", func(t *testing.T) {
		if _, err := e.svc.CreatePromotion(e.ctx, e.adv2, prog.ID, programs.PromotionInput{Title: "x"}); !errors.Is(err, programs.ErrNotFound) {
			t.Fatalf("err %v", err)
		}
	})
}

func TestActivePromotionsFollowTheClock(t *testing.T) {
	e := newEnv(t)
	prog := e.program(t, e.adv, programs.Public, "")
	pausedProg := e.program(t, e.adv, programs.Public, programs.ProgramPaused)
	day := 24 * time.Hour
	at := func(d time.Duration) *string { s := e.start.Add(d).Format(time.RFC3339); return &s }
	mk := func(programID, title string, from, to *string) programs.Promotion {
		p, err := e.svc.CreatePromotion(e.ctx, e.adv, programID, programs.PromotionInput{Title: title, StartsAt: from, EndsAt: to})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	always := mk(prog.ID, "always", nil, nil)
	current := mk(prog.ID, "current", at(-day), at(day))
	future := mk(prog.ID, "future", at(day), nil)
	expired := mk(prog.ID, "expired", nil, at(-day))
	mk(pausedProg.ID, "paused program", nil, nil)

	titles := func(f programs.PromotionFilter) []string {
		list, _, err := e.svc.ListPromotions(e.ctx, e.adv, f, page.Request{Limit: 50})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, p := range list {
			out = append(out, p.Title)
		}
		return out
	}
	if got := titles(programs.PromotionFilter{ProgramID: prog.ID}); !slices.Equal(got, []string{"expired", "future", "current", "always"}) {
		t.Fatalf("all of the program: %v", got)
	}
	if got := titles(programs.PromotionFilter{Active: true}); !slices.Equal(got, []string{"current", "always"}) {
		t.Fatalf("active now: %v", got)
	}
	e.clock.Set(e.start.Add(2 * day))
	if got := titles(programs.PromotionFilter{Active: true, ProgramID: prog.ID}); !slices.Equal(got, []string{"future", "always"}) {
		t.Fatalf("active two days later: %v", got)
	}
	if !always.Active || !current.Active || future.Active || expired.Active {
		t.Fatalf("active flags at creation: %v %v %v %v", always.Active, current.Active, future.Active, expired.Active)
	}
}

func TestAffiliatesSeePromotionsOfTheProgramsTheySee(t *testing.T) {
	e := newEnv(t)
	listed := e.program(t, e.adv, programs.Public, "")
	unlisted := e.program(t, e.adv, programs.Approval, "")
	hidden := e.program(t, e.adv, programs.Public, programs.ProgramPaused)
	for _, p := range []programs.Program{listed, unlisted, hidden} {
		if _, err := e.svc.CreatePromotion(e.ctx, e.adv, p.ID, programs.PromotionInput{Title: p.ID}); err != nil {
			t.Fatal(err)
		}
	}
	list := func(f programs.PromotionFilter) ([]string, error) {
		l, _, err := e.svc.ListPromotions(e.ctx, e.aff, f, page.Request{Limit: 50})
		var out []string
		for _, p := range l {
			out = append(out, p.ProgramID)
		}
		return out, err
	}
	if got, err := list(programs.PromotionFilter{}); err != nil || !slices.Equal(got, []string{listed.ID}) {
		t.Fatalf("unfiltered: %v %v, want only the listed program's", got, err)
	}
	if got, err := list(programs.PromotionFilter{ProgramID: unlisted.ID}); err != nil || !slices.Equal(got, []string{unlisted.ID}) {
		t.Fatalf("unlisted program by id: %v %v", got, err)
	}
	if _, err := list(programs.PromotionFilter{ProgramID: hidden.ID}); !errors.Is(err, programs.ErrNotFound) {
		t.Fatalf("a program the affiliate cannot see: %v", err)
	}
	if _, _, err := e.svc.ListPromotions(e.ctx, e.adv2, programs.PromotionFilter{ProgramID: listed.ID}, page.Request{Limit: 5}); !errors.Is(err, programs.ErrNotFound) {
		t.Fatalf("another advertiser's program: %v", err)
	}
	if _, err := list(programs.PromotionFilter{ProgramID: "nope"}); fields(t, err)[0] != "program_id" {
		t.Fatal("a malformed program id is accepted")
	}
}

func TestPromotionUpdates(t *testing.T) {
	e := newEnv(t)
	prog := e.program(t, e.adv, programs.Public, "")
	pr, err := e.svc.CreatePromotion(e.ctx, e.adv, prog.ID, programs.PromotionInput{Title: "Sale", CouponCode: ptr("A1"),
		StartsAt: ptr("2026-03-01T00:00:00Z"), EndsAt: ptr("2026-04-01T00:00:00Z")})
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Set(e.start.Add(time.Hour))
	update := func(who programs.Actor, body string) (programs.Promotion, error) {
		var pp programs.PromotionPatch
		mustJSON(t, body, &pp)
		return e.svc.UpdatePromotion(e.ctx, who, pr.ID, pp)
	}
	got, err := update(e.adv, `{"title":"Big sale","coupon_code":null}`)
	if err != nil || got.Title != "Big sale" || got.CouponCode != nil || !got.StartsAt.Equal(*pr.StartsAt) || !got.UpdatedAt.Equal(e.clock.Now()) || !got.CreatedAt.Equal(pr.CreatedAt) {
		t.Fatalf("update: %+v %v", got, err)
	}
	if _, err := update(e.adv, `{"ends_at":"2026-02-01T00:00:00Z"}`); fields(t, err)[0] != "ends_at" {
		t.Fatal("an end before the kept start is accepted")
	}
	if _, err := update(e.adv, `{"title":null}`); fields(t, err)[0] != "title" {
		t.Fatal("a null title is accepted")
	}
	if _, err := update(e.adv2, `{"title":"x"}`); !errors.Is(err, programs.ErrNotFound) {
		t.Fatalf("another advertiser: %v", err)
	}
}
