package httpapi_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/programs"
)

// profile is a partner profile answer.
type profile struct {
	CompanyID   string `json:"company_id"`
	DisplayName string `json:"display_name"`
	Website     string `json:"website"`
	Audience    string `json:"audience"`
	PayoutEmail string `json:"payout_email"`
	UpdatedAt   string `json:"updated_at"` // null leaves it empty
}

// namedPartnership is a partnership answer with the companies' names.
type namedPartnership struct {
	AffiliateID    string `json:"affiliate_id"`
	AffiliateName  string `json:"affiliate_name"`
	AdvertiserName string `json:"advertiser_name"`
}

func TestPartnerProfiles(t *testing.T) {
	f := newProgramsFixture(t)
	f.srv.MountProfiles(programs.NewService(f.db, programs.Options{}))
	affMember := f.session(t, f.affID, identity.Affiliate, "member")
	adv2ID, _ := f.company(t, identity.Advertiser)
	adv2Owner := f.session(t, adv2ID, identity.Advertiser, "owner")
	otherAffID, _ := f.company(t, identity.Affiliate)
	partner := "/api/affiliates/" + f.affID + "/profile"

	r := f.do(t, "GET", "/api/profile", f.affOwner, "")
	expect(t, r, 200, "")
	if p := decode[profile](t, r); p.CompanyID != f.affID || p.DisplayName != "affiliate co" || p.Website != "" || p.UpdatedAt != "" {
		t.Fatalf("empty profile %s", r.raw)
	}

	t.Run("invalid fields are listed", func(t *testing.T) {
		r := f.do(t, "PUT", "/api/profile", f.affOwner, `{"display_name":" ","website":"javascript:alert(1)",
			"audience":"`+strings.Repeat("a", 2001)+`","payout_email":"Pay <pay@example.com>"}`)
		expect(t, r, 400, "validation_failed")
		var got []string
		for _, e := range r.problem.Errors {
			got = append(got, e.Field)
		}
		if !slices.Equal(got, []string{"display_name", "website", "audience", "payout_email"}) {
			t.Fatalf("fields %v", got)
		}
		expect(t, f.do(t, "PUT", "/api/profile", f.affOwner, `{"display_name":"x\u0007y"}`), 400, "validation_failed")
		expect(t, f.do(t, "PUT", "/api/profile", f.affOwner, `{"display_name":"`+strings.Repeat("n", 201)+`"}`), 400, "validation_failed")
		expect(t, f.do(t, "PUT", "/api/profile", f.affOwner, `{"display_name":"x","payout_email":"`+strings.Repeat("a", 250)+`@x.io"}`), 400, "validation_failed")
		expect(t, f.do(t, "PUT", "/api/profile", f.affOwner, `{"display_name":"x","nickname":"y"}`), 400, "invalid_json")
	})
	t.Run("only affiliate owners and admins save it", func(t *testing.T) {
		expect(t, f.do(t, "PUT", "/api/profile", affMember, `{"display_name":"Nope"}`), 403, "forbidden")
		expect(t, f.do(t, "GET", "/api/profile", affMember, ""), 200, "")
		expect(t, f.do(t, "GET", "/api/profile", f.advOwner, ""), 403, "forbidden")
		expect(t, f.do(t, "PUT", "/api/profile", f.advOwner, `{"display_name":"Nope"}`), 403, "forbidden")
		expect(t, f.do(t, "GET", "/api/profile", apiKey(f.aff), ""), 401, "api_key_not_allowed")
	})

	r = f.do(t, "PUT", "/api/profile", f.affOwner, `{"display_name":"  Ana's Deals ","website":"https://deals.example.org/",
		"audience":"Bargain hunters in Spain.\nNewsletter, 40k readers.","payout_email":"pay@deals.example.org"}`)
	expect(t, r, 200, "")
	saved := decode[profile](t, r)
	if saved.DisplayName != "Ana's Deals" || saved.PayoutEmail != "pay@deals.example.org" || saved.UpdatedAt == "" ||
		saved.Audience != "Bargain hunters in Spain.\nNewsletter, 40k readers." {
		t.Fatalf("saved %s", r.raw)
	}

	t.Run("a brand reads no profile of an affiliate that never applied to it", func(t *testing.T) {
		expect(t, f.do(t, "GET", partner, f.advOwner, ""), 404, "not_found")
	})

	prg := f.createProgram(t, "approval").ID
	expect(t, f.do(t, "POST", "/api/partnerships", f.affOwner, `{"program_id":"`+prg+`"}`), 201, "")

	t.Run("the brand applied to reads it, whoever of its users asks", func(t *testing.T) {
		for _, h := range []map[string]string{f.advOwner, f.advMember} {
			r := f.do(t, "GET", partner, h, "")
			expect(t, r, 200, "")
			if got := decode[profile](t, r); got != saved {
				t.Fatalf("brand reads %+v, want %+v", got, saved)
			}
		}
	})
	t.Run("company isolation", func(t *testing.T) {
		expect(t, f.do(t, "GET", partner, adv2Owner, ""), 404, "not_found")
		expect(t, f.do(t, "GET", "/api/affiliates/"+otherAffID+"/profile", f.advOwner, ""), 404, "not_found")
		expect(t, f.do(t, "GET", "/api/affiliates/"+f.advID+"/profile", f.advOwner, ""), 404, "not_found")
		expect(t, f.do(t, "GET", partner, f.affOwner, ""), 403, "forbidden")
		expect(t, f.do(t, "GET", "/api/affiliates/prg_x/profile", f.advOwner, ""), 400, "validation_failed")
	})
	t.Run("partnerships carry both companies' names", func(t *testing.T) {
		for _, h := range []map[string]string{f.advOwner, f.affOwner} {
			r := f.do(t, "GET", "/api/partnerships", h, "")
			expect(t, r, 200, "")
			got := decode[list[namedPartnership]](t, r).Data
			if len(got) != 1 || got[0].AffiliateName != "Ana's Deals" || got[0].AdvertiserName != "advertiser co" {
				t.Fatalf("partnerships %s", r.raw)
			}
		}
		if got := idsOf(t, f.do(t, "GET", "/api/partnerships", adv2Owner, "")); len(got) != 0 {
			t.Fatalf("another brand lists %v", got)
		}
	})
}
