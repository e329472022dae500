package httpapi_test

import (
	"slices"
	"testing"

	"github.com/partnerstream/partnerstream/internal/identity"
)

// The partner API answers only the caller's own data: an affiliate's programs are those it
// has a partnership with that is not rejected, never the catalogue of public programs it has
// not joined, nor the programs another affiliate joined.
func TestThePartnerAPIListsOnlyTheAffiliatesOwnPrograms(t *testing.T) {
	f := newProgramsFixture(t)
	apply := func(key, program string) string {
		t.Helper()
		r := f.do(t, "POST", "/api/v1/partnerships", apiKey(key), `{"program_id":"`+program+`"}`)
		if r.status != 201 && r.status != 200 {
			t.Fatalf("apply to %s: %d %s", program, r.status, r.raw)
		}
		return decode[resource](t, r).ID
	}
	approved := f.createProgram(t, "public").ID
	pending := f.createProgram(t, "approval").ID
	rejected := f.createProgram(t, "approval").ID
	paused := f.createProgram(t, "public").ID
	notJoined := f.createProgram(t, "public").ID
	theirs := f.createProgram(t, "public").ID

	apply(f.aff, approved)
	apply(f.aff, pending)
	apply(f.aff, paused)
	expect(t, f.do(t, "POST", "/api/partnerships/"+apply(f.aff, rejected)+"/reject", f.advOwner, ""), 200, "")
	expect(t, f.do(t, "PATCH", "/api/programs/"+paused, f.advOwner, `{"status":"paused"}`), 200, "")
	_, otherKey := f.company(t, identity.Affiliate)
	apply(otherKey, theirs)

	r := f.do(t, "GET", "/api/partner-api/programs", apiKey(f.aff), "")
	expect(t, r, 200, "")
	if got, want := idsOf(t, r), []string{paused, pending, approved}; !slices.Equal(got, want) {
		t.Errorf("the affiliate's partner API lists %v, want its partnered programs %v (not %s, %s, %s)", got, want, rejected, notJoined, theirs)
	}
	if got := idsOf(t, f.do(t, "GET", "/api/partner-api/programs", apiKey(otherKey), "")); !slices.Equal(got, []string{theirs}) {
		t.Errorf("the other affiliate's partner API lists %v, want only %s", got, theirs)
	}
	// The catalogue is still where an affiliate finds programs to join.
	if got := idsOf(t, f.do(t, "GET", "/api/v1/programs", apiKey(f.aff), "")); !slices.Contains(got, notJoined) || !slices.Contains(got, theirs) {
		t.Errorf("the catalogue lists %v, want the public programs too", got)
	}
	// An advertiser's partner API lists its own programs, as everywhere.
	if got := idsOf(t, f.do(t, "GET", "/api/partner-api/programs", apiKey(f.adv), "")); len(got) != 6 {
		t.Errorf("the advertiser's partner API lists %v, want its 6 programs", got)
	}
	if got := idsOf(t, f.do(t, "GET", "/api/partner-api/programs", apiKey(f.adv2), "")); len(got) != 0 {
		t.Errorf("another advertiser's partner API lists %v", got)
	}
}
