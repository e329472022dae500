package httpapi_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/programs"
)

// programsFixture is the shared fixture with the program and partnership routes mounted, a
// second advertiser, and dashboard sessions.
type programsFixture struct {
	*fixture
	adv2      string // API key of another advertiser
	advOwner  map[string]string
	advMember map[string]string
	affOwner  map[string]string
}

func newProgramsFixture(t *testing.T) *programsFixture {
	t.Helper()
	f := &programsFixture{fixture: newFixture(t)}
	svc := programs.NewService(f.db, programs.Options{})
	f.srv.MountPrograms(svc)
	f.srv.MountPartnerships(svc)
	f.srv.MountOnboarding(svc)
	_, f.adv2 = f.company(t, identity.Advertiser)
	f.advOwner = f.dashboardAs(t, identity.Advertiser, "owner")
	f.advMember = f.dashboardAs(t, identity.Advertiser, "member")
	f.affOwner = f.dashboardAs(t, identity.Affiliate, "owner")
	return f
}

// program is a program answer, with the fields the tests read.
type program struct {
	ID         string      `json:"id"`
	Visibility string      `json:"visibility"`
	HoldDays   *int        `json:"hold_days"`
	Commission *commission `json:"commission"`
}

// partnership is a partnership answer.
type partnership struct {
	ID          string      `json:"id"`
	Status      string      `json:"status"`
	AffiliateID string      `json:"affiliate_id"`
	Commission  *commission `json:"commission"`
}

// promotion is a promotion answer.
type promotion struct {
	ID         string  `json:"id"`
	Active     bool    `json:"active"`
	EndsAt     *string `json:"ends_at"`
	CouponCode string  `json:"coupon_code"`
}

func (f *programsFixture) createProgram(t *testing.T, visibility string) program {
	t.Helper()
	r := f.do(t, "POST", "/api/programs", f.advOwner, fmt.Sprintf(`{"name":"Shoes","landing_url":"https://shop.example.com/",
		"currency":"EUR","commission":{"type":"fixed","amount":"5"},"visibility":%q}`, visibility))
	if r.status != 201 {
		t.Fatalf("create program: %d %s", r.status, r.raw)
	}
	return decode[program](t, r)
}

func TestProgramRoutes(t *testing.T) {
	f := newProgramsFixture(t)
	p := f.createProgram(t, "public")
	if c := p.Commission; c == nil || c.Amount != "5.00" || c.Currency != "EUR" || p.Visibility != "public" || p.HoldDays != nil {
		t.Fatalf("created %+v", p)
	}
	id := p.ID
	private := f.createProgram(t, "approval").ID

	cases := []struct {
		name    string
		method  string
		path    string
		headers map[string]string
		body    string
		status  int
		code    string
	}{
		{"invalid fields are listed", "POST", "/api/programs", f.advOwner,
			`{"name":"","landing_url":"ftp://x","currency":"EUX","commission":{"type":"percent","percent":"101"}}`, 400, "validation_failed"},
		{"an unknown field is refused", "POST", "/api/programs", f.advOwner, `{"nme":"x"}`, 400, "invalid_json"},
		{"an affiliate cannot create programs", "POST", "/api/programs", f.affOwner, `{"name":"x"}`, 403, "forbidden"},
		{"a member cannot create programs", "POST", "/api/programs", f.advMember, `{"name":"x"}`, 403, "forbidden"},
		{"an API key cannot use the dashboard", "POST", "/api/programs", apiKey(f.adv), `{"name":"x"}`, 401, "api_key_not_allowed"},
		{"the advertiser reads its program", "GET", "/api/v1/programs/" + id, apiKey(f.adv), "", 200, ""},
		{"a member reads it in the dashboard", "GET", "/api/programs/" + id, f.advMember, "", 200, ""},
		{"another advertiser gets 404", "GET", "/api/v1/programs/" + id, apiKey(f.adv2), "", 404, "not_found"},
		{"an affiliate reads an unlisted program by id", "GET", "/api/v1/programs/" + private, apiKey(f.aff), "", 200, ""},
		{"an unknown id is 404", "GET", "/api/v1/programs/prg_nope", apiKey(f.adv), "", 404, "not_found"},
		{"an unknown status filter is 400", "GET", "/api/v1/programs?status=gone", apiKey(f.adv), "", 400, "validation_failed"},
		{"a bad limit is 400", "GET", "/api/v1/programs?limit=0", apiKey(f.adv), "", 400, "validation_failed"},
		{"the partner API is read-only", "POST", "/api/partner-api/programs", apiKey(f.adv), "{}", 405, "method_not_allowed"},
		{"a patch with a new currency is 400", "PATCH", "/api/programs/" + id, f.advOwner, `{"currency":"USD"}`, 400, "validation_failed"},
		{"a member cannot patch", "PATCH", "/api/programs/" + id, f.advMember, `{"name":"x"}`, 403, "forbidden"},
		{"a patch is applied", "PATCH", "/api/programs/" + id, f.advOwner, `{"hold_days":7,"commission":{"type":"percent","percent":"12.5"}}`, 200, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			expect(t, f.do(t, c.method, c.path, c.headers, c.body), c.status, c.code)
		})
	}

	t.Run("validation lists every field", func(t *testing.T) {
		r := f.do(t, "POST", "/api/programs", f.advOwner, `{"name":"","landing_url":"ftp://x","currency":"EUX","commission":{"type":"fixed","amount":"1"}}`)
		var got []string
		for _, e := range r.problem.Errors {
			got = append(got, e.Field)
		}
		if !slices.Equal(got, []string{"name", "landing_url", "currency"}) {
			t.Fatalf("fields %v", got)
		}
	})
	t.Run("archived is final", func(t *testing.T) {
		expect(t, f.do(t, "PATCH", "/api/programs/"+private, f.advOwner, `{"status":"archived"}`), 200, "")
		r := f.do(t, "PATCH", "/api/programs/"+private, f.advOwner, `{"status":"active"}`)
		expect(t, r, 409, "invalid_transition")
		if r.problem.CurrentStatus != "archived" || len(r.problem.Allowed) != 0 {
			t.Fatalf("problem %s", r.raw)
		}
	})
	t.Run("each family lists what its caller sees", func(t *testing.T) {
		if got := idsOf(t, f.do(t, "GET", "/api/v1/programs", apiKey(f.aff), "")); !slices.Equal(got, []string{id}) {
			t.Fatalf("affiliate catalogue: %v, want only the public program", got)
		}
		if got := idsOf(t, f.do(t, "GET", "/api/partner-api/programs", apiKey(f.aff), "")); len(got) != 0 {
			t.Fatalf("affiliate partner API without partnerships: %v, want none", got)
		}
		if got := idsOf(t, f.do(t, "GET", "/api/programs", f.advMember, "")); !slices.Equal(got, []string{private, id}) {
			t.Fatalf("advertiser dashboard: %v", got)
		}
		if got := idsOf(t, f.do(t, "GET", "/api/v1/programs", apiKey(f.adv2), "")); len(got) != 0 {
			t.Fatalf("another advertiser lists %v", got)
		}
	})
}

func TestProgramListPagination(t *testing.T) {
	f := newProgramsFixture(t)
	var want []string
	for range 5 {
		want = append([]string{f.createProgram(t, "approval").ID}, want...)
	}
	var got []string
	path := "/api/v1/programs?limit=2"
	for range 4 {
		r := f.do(t, "GET", path, apiKey(f.adv), "")
		expect(t, r, 200, "")
		got = append(got, idsOf(t, r)...)
		next := decode[list[resource]](t, r).NextCursor
		if next == "" {
			break
		}
		path = "/api/v1/programs?limit=2&cursor=" + next
	}
	if !slices.Equal(got, want) {
		t.Fatalf("pages %v, want %v", got, want)
	}
	expect(t, f.do(t, "GET", "/api/v1/programs?cursor=%%%", apiKey(f.adv), ""), 400, "invalid_cursor")
}

func TestPromotionRoutes(t *testing.T) {
	f := newProgramsFixture(t)
	id := f.createProgram(t, "public").ID
	r := f.do(t, "POST", "/api/programs/"+id+"/promotions", f.advOwner, `{"title":"Spring","coupon_code":"SPRING","starts_at":"2020-01-01T00:00:00Z"}`)
	expect(t, r, 201, "")
	created := decode[promotion](t, r)
	promo := created.ID
	if !created.Active || created.EndsAt != nil {
		t.Fatalf("promotion %s", r.raw)
	}
	expect(t, f.do(t, "POST", "/api/programs/"+id+"/promotions", f.advOwner,
		`{"title":"x","starts_at":"2020-01-02T00:00:00Z","ends_at":"2020-01-01T00:00:00Z"}`), 400, "validation_failed")
	expect(t, f.do(t, "POST", "/api/programs/"+id+"/promotions", f.affOwner, `{"title":"x"}`), 403, "forbidden")
	expect(t, f.do(t, "POST", "/api/programs/prg_nope/promotions", f.advOwner, `{"title":"x"}`), 404, "not_found")

	r = f.do(t, "PATCH", "/api/promotions/"+promo, f.advOwner, `{"ends_at":"2021-01-01T00:00:00Z"}`)
	expect(t, r, 200, "")
	if p := decode[promotion](t, r); p.Active || p.CouponCode != "SPRING" {
		t.Fatalf("patched %s", r.raw)
	}
	expect(t, f.do(t, "PATCH", "/api/promotions/"+promo, apiKey(f.adv), `{}`), 401, "api_key_not_allowed")

	for _, c := range []struct {
		path    string
		headers map[string]string
		n       int
	}{
		{"/api/v1/promotions", apiKey(f.aff), 1},
		{"/api/v1/promotions?active=true", apiKey(f.aff), 0},
		{"/api/v1/promotions?program_id=" + id, apiKey(f.adv), 1},
		{"/api/programs/" + id + "/promotions", f.affOwner, 1},
		{"/api/programs/" + id + "/promotions?active=false", f.advMember, 1},
	} {
		r := f.do(t, "GET", c.path, c.headers, "")
		if r.status != 200 || len(idsOf(t, r)) != c.n {
			t.Errorf("GET %s: %d %s, want %d promotions", c.path, r.status, r.raw, c.n)
		}
	}
	expect(t, f.do(t, "GET", "/api/v1/promotions?active=maybe", apiKey(f.aff), ""), 400, "validation_failed")
	expect(t, f.do(t, "GET", "/api/v1/promotions?program_id="+id, apiKey(f.adv2), ""), 404, "not_found")
}

func TestPartnershipRoutes(t *testing.T) {
	f := newProgramsFixture(t)
	public := f.createProgram(t, "public").ID
	approval := f.createProgram(t, "approval").ID
	apply := func(h map[string]string, program string) response {
		return f.do(t, "POST", "/api/v1/partnerships", h, `{"program_id":"`+program+`","message":"hi"}`)
	}

	expect(t, apply(apiKey(f.adv), public), 403, "forbidden")
	expect(t, apply(apiKey(f.aff), "prg_00000000000000000000000000"), 404, "not_found")
	expect(t, apply(apiKey(f.aff), "nope"), 400, "validation_failed")

	first := apply(apiKey(f.aff), public)
	expect(t, first, 201, "")
	joined := decode[partnership](t, first)
	if joined.Status != "approved" || joined.AffiliateID != f.affID || joined.Commission != nil {
		t.Fatalf("public application %s", first.raw)
	}
	again := apply(apiKey(f.aff), public)
	expect(t, again, 200, "")
	if id := decode[partnership](t, again).ID; id != joined.ID {
		t.Fatalf("applying twice made %v and %v", joined.ID, id)
	}

	h := map[string]string{"x-api-key": f.aff, "Idempotency-Key": "apply-1"}
	r := f.do(t, "POST", "/api/v1/partnerships", h, `{"program_id":"`+approval+`"}`)
	expect(t, r, 201, "")
	if decode[partnership](t, r).Status != "pending" {
		t.Fatalf("approval application %s", r.raw)
	}
	if replay := f.do(t, "POST", "/api/v1/partnerships", h, `{"program_id":"`+approval+`"}`); replay.status != 201 || replay.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay %d %v", replay.status, replay.header)
	}
	pending := decode[partnership](t, r).ID

	action := func(h map[string]string, id, what string) response {
		return f.do(t, "POST", "/api/partnerships/"+id+"/"+what, h, "")
	}
	steps := []struct {
		name    string
		headers map[string]string
		action  string
		status  int
		allowed []string
	}{
		{"the affiliate cannot approve", f.affOwner, "approve", 403, nil},
		{"a member cannot approve", f.advMember, "approve", 403, nil},
		{"pending cannot be suspended", f.advOwner, "suspend", 409, []string{"approved", "rejected"}},
		{"pending is approved", f.advOwner, "approve", 200, nil},
		{"approved cannot be approved again", f.advOwner, "approve", 409, []string{"suspended"}},
		{"approved cannot be rejected", f.advOwner, "reject", 409, []string{"suspended"}},
		{"approved is suspended", f.advOwner, "suspend", 200, nil},
		{"suspended is final", f.advOwner, "approve", 409, []string{}},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			r := action(s.headers, pending, s.action)
			if r.status != s.status {
				t.Fatalf("%s: %d %s", s.action, r.status, r.raw)
			}
			if s.status == 409 {
				if r.problem.Code != "invalid_transition" || !slices.Equal(r.problem.Allowed, s.allowed) {
					t.Fatalf("problem %s, want allowed %v", r.raw, s.allowed)
				}
			}
		})
	}
	expect(t, action(f.advOwner, "ptn_nope", "approve"), 404, "not_found")

	t.Run("the commission override", func(t *testing.T) {
		id := joined.ID
		r := f.do(t, "PATCH", "/api/partnerships/"+id, f.advOwner, `{"commission":{"type":"fixed","amount":"7.5"}}`)
		expect(t, r, 200, "")
		if c := decode[partnership](t, r).Commission; c == nil || c.Amount != "7.50" || c.Currency != "EUR" {
			t.Fatalf("override %s", r.raw)
		}
		r = f.do(t, "PATCH", "/api/partnerships/"+id, f.advOwner, `{"commission":null}`)
		if r.status != 200 || decode[partnership](t, r).Commission != nil {
			t.Fatalf("cleared override %d %s", r.status, r.raw)
		}
		expect(t, f.do(t, "PATCH", "/api/partnerships/"+id, f.advOwner, `{"commission":{"type":"fixed","amount":"7.505"}}`), 400, "validation_failed")
		expect(t, f.do(t, "PATCH", "/api/partnerships/"+id, f.affOwner, `{"commission":null}`), 403, "forbidden")
	})

	t.Run("the dashboard applies for affiliates", func(t *testing.T) {
		expect(t, f.do(t, "POST", "/api/partnerships", f.affOwner, `{"program_id":"`+public+`"}`), 200, "")
		expect(t, f.do(t, "POST", "/api/partnerships", f.advOwner, `{"program_id":"`+public+`"}`), 403, "forbidden")
	})

	t.Run("lists are scoped and filtered", func(t *testing.T) {
		for _, c := range []struct {
			path    string
			headers map[string]string
			want    []string
		}{
			{"/api/v1/partnerships", apiKey(f.aff), []string{pending, joined.ID}},
			{"/api/v1/partnerships?status=suspended", apiKey(f.adv), []string{pending}},
			{"/api/partnerships?program_id=" + public, f.advMember, []string{joined.ID}},
			{"/api/partnerships", f.affOwner, []string{pending, joined.ID}},
			{"/api/v1/partnerships", apiKey(f.adv2), nil},
		} {
			r := f.do(t, "GET", c.path, c.headers, "")
			if r.status != 200 || !slices.Equal(idsOf(t, r), c.want) {
				t.Errorf("GET %s: %d %s, want %v", c.path, r.status, r.raw, c.want)
			}
		}
		expect(t, f.do(t, "GET", "/api/v1/partnerships?status=done", apiKey(f.aff), ""), 400, "validation_failed")
	})
}
