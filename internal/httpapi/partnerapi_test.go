package httpapi_test

import (
	"context"
	"slices"
	"testing"

	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/ids"
)

// The partner API answers only the caller's own data: an affiliate's programs are those it
// has a partnership with that is not rejected, never the catalogue of public programs it has
// not joined, nor the programs another affiliate joined.
func TestThePartnerAPIListsOnlyTheAffiliatesOwnPrograms(t *testing.T) {
	f := newProgramsFixture(t)
	apply := func(key, program string) string {
		t.Helper()
		r := f.do(t, "POST", "/api/v1/partnerships", prgKey(key), `{"program_id":"`+program+`"}`)
		if r.status != 201 && r.status != 200 {
			t.Fatalf("apply to %s: %d %s", program, r.status, r.raw)
		}
		return r.body["id"].(string)
	}
	approved := f.createProgram(t, "public")["id"].(string)
	pending := f.createProgram(t, "approval")["id"].(string)
	rejected := f.createProgram(t, "approval")["id"].(string)
	paused := f.createProgram(t, "public")["id"].(string)
	notJoined := f.createProgram(t, "public")["id"].(string)
	theirs := f.createProgram(t, "public")["id"].(string)

	apply(f.aff, approved)
	apply(f.aff, pending)
	apply(f.aff, paused)
	prgExpect(t, f.do(t, "POST", "/api/partnerships/"+apply(f.aff, rejected)+"/reject", f.advOwner, ""), 200, "")
	prgExpect(t, f.do(t, "PATCH", "/api/programs/"+paused, f.advOwner, `{"status":"paused"}`), 200, "")
	_, otherKey := f.company(t, identity.Affiliate)
	apply(otherKey, theirs)

	r := f.do(t, "GET", "/api/partner-api/programs", prgKey(f.aff), "")
	prgExpect(t, r, 200, "")
	if got, want := prgIDs(t, r), []string{paused, pending, approved}; !slices.Equal(got, want) {
		t.Errorf("the affiliate's partner API lists %v, want its partnered programs %v (not %s, %s, %s)", got, want, rejected, notJoined, theirs)
	}
	if got := prgIDs(t, f.do(t, "GET", "/api/partner-api/programs", prgKey(otherKey), "")); !slices.Equal(got, []string{theirs}) {
		t.Errorf("the other affiliate's partner API lists %v, want only %s", got, theirs)
	}
	// The catalogue is still where an affiliate finds programs to join.
	if got := prgIDs(t, f.do(t, "GET", "/api/v1/programs", prgKey(f.aff), "")); !slices.Contains(got, notJoined) || !slices.Contains(got, theirs) {
		t.Errorf("the catalogue lists %v, want the public programs too", got)
	}
	// An advertiser's partner API lists its own programs, as everywhere.
	if got := prgIDs(t, f.do(t, "GET", "/api/partner-api/programs", prgKey(f.adv), "")); len(got) != 6 {
		t.Errorf("the advertiser's partner API lists %v, want its 6 programs", got)
	}
	if got := prgIDs(t, f.do(t, "GET", "/api/partner-api/programs", prgKey(f.adv2), "")); len(got) != 0 {
		t.Errorf("another advertiser's partner API lists %v", got)
	}
}

// company makes another company of the kind and returns its id and an API key of it.
func (f *fixture) company(t *testing.T, kind string) (id, key string) {
	t.Helper()
	ctx := context.Background()
	co, _, err := f.ids.CreateCompany(ctx, identity.NewCompany{Kind: kind, Name: "other " + kind, OwnerEmail: ids.New("usr") + "@example.test"})
	if err != nil {
		t.Fatal(err)
	}
	if key, _, err = f.ids.CreateAPIKey(ctx, co.ID, "other"); err != nil {
		t.Fatal(err)
	}
	return co.ID, key
}
