package httpapi_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/partnerstream/partnerstream/internal/auth"
	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/programs"
)

// programsFixture is the shared fixture with the program and partnership routes mounted, a
// second advertiser, and dashboard sessions.
type programsFixture struct {
	*fixture
	affID     string
	adv2      string // API key of another advertiser
	advOwner  map[string]string
	advMember map[string]string
	affOwner  map[string]string
}

func newProgramsFixture(t *testing.T) *programsFixture {
	t.Helper()
	ctx := context.Background()
	f := &programsFixture{fixture: newFixture(t)}
	svc := programs.NewService(f.db, programs.Options{})
	f.srv.MountPrograms(svc)
	f.srv.MountPartnerships(svc)
	rec, err := f.ids.LookupKey(ctx, auth.HashKey(f.aff))
	if err != nil {
		t.Fatal(err)
	}
	f.affID = rec.CompanyID
	co, _, err := f.ids.CreateCompany(ctx, identity.NewCompany{Kind: identity.Advertiser, Name: "rival", OwnerEmail: "rival@example.test"})
	if err != nil {
		t.Fatal(err)
	}
	if f.adv2, _, err = f.ids.CreateAPIKey(ctx, co.ID, "test"); err != nil {
		t.Fatal(err)
	}
	sessionFor := func(kind, role string) map[string]string { return f.dashboardAs(t, kind, role) }
	f.advOwner = sessionFor(identity.Advertiser, "owner")
	f.advMember = sessionFor(identity.Advertiser, "member")
	f.affOwner = sessionFor(identity.Affiliate, "owner")
	return f
}

func prgKey(k string) map[string]string { return map[string]string{"x-api-key": k} }

func (f *programsFixture) createProgram(t *testing.T, visibility string) map[string]any {
	t.Helper()
	r := f.do(t, "POST", "/api/programs", f.advOwner, fmt.Sprintf(`{"name":"Shoes","landing_url":"https://shop.example.com/",
		"currency":"EUR","commission":{"type":"fixed","amount":"5"},"visibility":%q}`, visibility))
	if r.status != 201 {
		t.Fatalf("create program: %d %s", r.status, r.raw)
	}
	return r.body
}

func prgExpect(t *testing.T, r response, status int, code string) {
	t.Helper()
	if r.status != status || (code != "" && r.body["code"] != code) {
		t.Fatalf("got %d %s, want %d %s", r.status, r.raw, status, code)
	}
}

func prgIDs(t *testing.T, r response) []string {
	t.Helper()
	var out []string
	for _, item := range r.body["data"].([]any) {
		out = append(out, item.(map[string]any)["id"].(string))
	}
	return out
}

func TestProgramRoutes(t *testing.T) {
	f := newProgramsFixture(t)
	p := f.createProgram(t, "public")
	if c := p["commission"].(map[string]any); c["amount"] != "5.00" || c["currency"] != "EUR" || p["visibility"] != "public" || p["hold_days"] != nil {
		t.Fatalf("created %v", p)
	}
	id := p["id"].(string)
	private := f.createProgram(t, "approval")["id"].(string)

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
		{"an API key cannot use the dashboard", "POST", "/api/programs", prgKey(f.adv), `{"name":"x"}`, 401, "api_key_not_allowed"},
		{"the advertiser reads its program", "GET", "/api/v1/programs/" + id, prgKey(f.adv), "", 200, ""},
		{"a member reads it in the dashboard", "GET", "/api/programs/" + id, f.advMember, "", 200, ""},
		{"another advertiser gets 404", "GET", "/api/v1/programs/" + id, prgKey(f.adv2), "", 404, "not_found"},
		{"an affiliate reads an unlisted program by id", "GET", "/api/v1/programs/" + private, prgKey(f.aff), "", 200, ""},
		{"an unknown id is 404", "GET", "/api/v1/programs/prg_nope", prgKey(f.adv), "", 404, "not_found"},
		{"an unknown status filter is 400", "GET", "/api/v1/programs?status=gone", prgKey(f.adv), "", 400, "validation_failed"},
		{"a bad limit is 400", "GET", "/api/v1/programs?limit=0", prgKey(f.adv), "", 400, "validation_failed"},
		{"the partner API is read-only", "POST", "/api/partner-api/programs", prgKey(f.adv), "{}", 405, "method_not_allowed"},
		{"a patch with a new currency is 400", "PATCH", "/api/programs/" + id, f.advOwner, `{"currency":"USD"}`, 400, "validation_failed"},
		{"a member cannot patch", "PATCH", "/api/programs/" + id, f.advMember, `{"name":"x"}`, 403, "forbidden"},
		{"a patch is applied", "PATCH", "/api/programs/" + id, f.advOwner, `{"hold_days":7,"commission":{"type":"percent","percent":"12.5"}}`, 200, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			prgExpect(t, f.do(t, c.method, c.path, c.headers, c.body), c.status, c.code)
		})
	}

	t.Run("validation lists every field", func(t *testing.T) {
		r := f.do(t, "POST", "/api/programs", f.advOwner, `{"name":"","landing_url":"ftp://x","currency":"EUX","commission":{"type":"fixed","amount":"1"}}`)
		var got []string
		for _, e := range r.body["errors"].([]any) {
			got = append(got, e.(map[string]any)["field"].(string))
		}
		if !slices.Equal(got, []string{"name", "landing_url", "currency"}) {
			t.Fatalf("fields %v", got)
		}
	})
	t.Run("archived is final", func(t *testing.T) {
		prgExpect(t, f.do(t, "PATCH", "/api/programs/"+private, f.advOwner, `{"status":"archived"}`), 200, "")
		r := f.do(t, "PATCH", "/api/programs/"+private, f.advOwner, `{"status":"active"}`)
		prgExpect(t, r, 409, "invalid_transition")
		if r.body["current_status"] != "archived" || len(r.body["allowed"].([]any)) != 0 {
			t.Fatalf("problem %s", r.raw)
		}
	})
	t.Run("each family lists what its caller sees", func(t *testing.T) {
		if got := prgIDs(t, f.do(t, "GET", "/api/v1/programs", prgKey(f.aff), "")); !slices.Equal(got, []string{id}) {
			t.Fatalf("affiliate catalogue: %v, want only the public program", got)
		}
		if got := prgIDs(t, f.do(t, "GET", "/api/partner-api/programs", prgKey(f.aff), "")); len(got) != 0 {
			t.Fatalf("affiliate partner API without partnerships: %v, want none", got)
		}
		if got := prgIDs(t, f.do(t, "GET", "/api/programs", f.advMember, "")); !slices.Equal(got, []string{private, id}) {
			t.Fatalf("advertiser dashboard: %v", got)
		}
		if got := prgIDs(t, f.do(t, "GET", "/api/v1/programs", prgKey(f.adv2), "")); len(got) != 0 {
			t.Fatalf("another advertiser lists %v", got)
		}
	})
}

func TestProgramListPagination(t *testing.T) {
	f := newProgramsFixture(t)
	var want []string
	for range 5 {
		want = append([]string{f.createProgram(t, "approval")["id"].(string)}, want...)
	}
	var got []string
	path := "/api/v1/programs?limit=2"
	for range 4 {
		r := f.do(t, "GET", path, prgKey(f.adv), "")
		prgExpect(t, r, 200, "")
		got = append(got, prgIDs(t, r)...)
		next := r.body["next_cursor"].(string)
		if next == "" {
			break
		}
		path = "/api/v1/programs?limit=2&cursor=" + next
	}
	if !slices.Equal(got, want) {
		t.Fatalf("pages %v, want %v", got, want)
	}
	prgExpect(t, f.do(t, "GET", "/api/v1/programs?cursor=%%%", prgKey(f.adv), ""), 400, "invalid_cursor")
}

func TestPromotionRoutes(t *testing.T) {
	f := newProgramsFixture(t)
	id := f.createProgram(t, "public")["id"].(string)
	r := f.do(t, "POST", "/api/programs/"+id+"/promotions", f.advOwner, `{"title":"Spring","coupon_code":"SPRING","starts_at":"2020-01-01T00:00:00Z"}`)
	prgExpect(t, r, 201, "")
	promo := r.body["id"].(string)
	if r.body["active"] != true || r.body["ends_at"] != nil {
		t.Fatalf("promotion %s", r.raw)
	}
	prgExpect(t, f.do(t, "POST", "/api/programs/"+id+"/promotions", f.advOwner,
		`{"title":"x","starts_at":"2020-01-02T00:00:00Z","ends_at":"2020-01-01T00:00:00Z"}`), 400, "validation_failed")
	prgExpect(t, f.do(t, "POST", "/api/programs/"+id+"/promotions", f.affOwner, `{"title":"x"}`), 403, "forbidden")
	prgExpect(t, f.do(t, "POST", "/api/programs/prg_nope/promotions", f.advOwner, `{"title":"x"}`), 404, "not_found")

	r = f.do(t, "PATCH", "/api/promotions/"+promo, f.advOwner, `{"ends_at":"2021-01-01T00:00:00Z"}`)
	prgExpect(t, r, 200, "")
	if r.body["active"] != false || r.body["coupon_code"] != "SPRING" {
		t.Fatalf("patched %s", r.raw)
	}
	prgExpect(t, f.do(t, "PATCH", "/api/promotions/"+promo, prgKey(f.adv), `{}`), 401, "api_key_not_allowed")

	for _, c := range []struct {
		path    string
		headers map[string]string
		n       int
	}{
		{"/api/v1/promotions", prgKey(f.aff), 1},
		{"/api/v1/promotions?active=true", prgKey(f.aff), 0},
		{"/api/v1/promotions?program_id=" + id, prgKey(f.adv), 1},
		{"/api/programs/" + id + "/promotions", f.affOwner, 1},
		{"/api/programs/" + id + "/promotions?active=false", f.advMember, 1},
	} {
		r := f.do(t, "GET", c.path, c.headers, "")
		if r.status != 200 || len(prgIDs(t, r)) != c.n {
			t.Errorf("GET %s: %d %s, want %d promotions", c.path, r.status, r.raw, c.n)
		}
	}
	prgExpect(t, f.do(t, "GET", "/api/v1/promotions?active=maybe", prgKey(f.aff), ""), 400, "validation_failed")
	prgExpect(t, f.do(t, "GET", "/api/v1/promotions?program_id="+id, prgKey(f.adv2), ""), 404, "not_found")
}

func TestPartnershipRoutes(t *testing.T) {
	f := newProgramsFixture(t)
	public := f.createProgram(t, "public")["id"].(string)
	approval := f.createProgram(t, "approval")["id"].(string)
	apply := func(h map[string]string, program string) response {
		return f.do(t, "POST", "/api/v1/partnerships", h, `{"program_id":"`+program+`","message":"hi"}`)
	}

	prgExpect(t, apply(prgKey(f.adv), public), 403, "forbidden")
	prgExpect(t, apply(prgKey(f.aff), "prg_00000000000000000000000000"), 404, "not_found")
	prgExpect(t, apply(prgKey(f.aff), "nope"), 400, "validation_failed")

	first := apply(prgKey(f.aff), public)
	prgExpect(t, first, 201, "")
	if first.body["status"] != "approved" || first.body["affiliate_id"] != f.affID || first.body["commission"] != nil {
		t.Fatalf("public application %s", first.raw)
	}
	again := apply(prgKey(f.aff), public)
	prgExpect(t, again, 200, "")
	if again.body["id"] != first.body["id"] {
		t.Fatalf("applying twice made %v and %v", first.body["id"], again.body["id"])
	}

	h := map[string]string{"x-api-key": f.aff, "Idempotency-Key": "apply-1"}
	r := f.do(t, "POST", "/api/v1/partnerships", h, `{"program_id":"`+approval+`"}`)
	prgExpect(t, r, 201, "")
	if r.body["status"] != "pending" {
		t.Fatalf("approval application %s", r.raw)
	}
	if replay := f.do(t, "POST", "/api/v1/partnerships", h, `{"program_id":"`+approval+`"}`); replay.status != 201 || replay.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay %d %v", replay.status, replay.header)
	}
	pending := r.body["id"].(string)

	action := func(h map[string]string, id, what string) response {
		return f.do(t, "POST", "/api/partnerships/"+id+"/"+what, h, "")
	}
	steps := []struct {
		name    string
		headers map[string]string
		action  string
		status  int
		allowed []any
	}{
		{"the affiliate cannot approve", f.affOwner, "approve", 403, nil},
		{"a member cannot approve", f.advMember, "approve", 403, nil},
		{"pending cannot be suspended", f.advOwner, "suspend", 409, []any{"approved", "rejected"}},
		{"pending is approved", f.advOwner, "approve", 200, nil},
		{"approved cannot be approved again", f.advOwner, "approve", 409, []any{"suspended"}},
		{"approved cannot be rejected", f.advOwner, "reject", 409, []any{"suspended"}},
		{"approved is suspended", f.advOwner, "suspend", 200, nil},
		{"suspended is final", f.advOwner, "approve", 409, []any{}},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			r := action(s.headers, pending, s.action)
			if r.status != s.status {
				t.Fatalf("%s: %d %s", s.action, r.status, r.raw)
			}
			if s.status == 409 {
				if r.body["code"] != "invalid_transition" || !slices.Equal(r.body["allowed"].([]any), s.allowed) {
					t.Fatalf("problem %s, want allowed %v", r.raw, s.allowed)
				}
			}
		})
	}
	prgExpect(t, action(f.advOwner, "ptn_nope", "approve"), 404, "not_found")

	t.Run("the commission override", func(t *testing.T) {
		id := first.body["id"].(string)
		r := f.do(t, "PATCH", "/api/partnerships/"+id, f.advOwner, `{"commission":{"type":"fixed","amount":"7.5"}}`)
		prgExpect(t, r, 200, "")
		if c := r.body["commission"].(map[string]any); c["amount"] != "7.50" || c["currency"] != "EUR" {
			t.Fatalf("override %s", r.raw)
		}
		r = f.do(t, "PATCH", "/api/partnerships/"+id, f.advOwner, `{"commission":null}`)
		if r.status != 200 || r.body["commission"] != nil {
			t.Fatalf("cleared override %d %s", r.status, r.raw)
		}
		prgExpect(t, f.do(t, "PATCH", "/api/partnerships/"+id, f.advOwner, `{"commission":{"type":"fixed","amount":"7.505"}}`), 400, "validation_failed")
		prgExpect(t, f.do(t, "PATCH", "/api/partnerships/"+id, f.affOwner, `{"commission":null}`), 403, "forbidden")
	})

	t.Run("the dashboard applies for affiliates", func(t *testing.T) {
		prgExpect(t, f.do(t, "POST", "/api/partnerships", f.affOwner, `{"program_id":"`+public+`"}`), 200, "")
		prgExpect(t, f.do(t, "POST", "/api/partnerships", f.advOwner, `{"program_id":"`+public+`"}`), 403, "forbidden")
	})

	t.Run("lists are scoped and filtered", func(t *testing.T) {
		for _, c := range []struct {
			path    string
			headers map[string]string
			want    []string
		}{
			{"/api/v1/partnerships", prgKey(f.aff), []string{pending, first.body["id"].(string)}},
			{"/api/v1/partnerships?status=suspended", prgKey(f.adv), []string{pending}},
			{"/api/partnerships?program_id=" + public, f.advMember, []string{first.body["id"].(string)}},
			{"/api/partnerships", f.affOwner, []string{pending, first.body["id"].(string)}},
			{"/api/v1/partnerships", prgKey(f.adv2), nil},
		} {
			r := f.do(t, "GET", c.path, c.headers, "")
			if r.status != 200 || !slices.Equal(prgIDs(t, r), c.want) {
				t.Errorf("GET %s: %d %s, want %v", c.path, r.status, r.raw, c.want)
			}
		}
		prgExpect(t, f.do(t, "GET", "/api/v1/partnerships?status=done", prgKey(f.aff), ""), 400, "validation_failed")
	})
}
