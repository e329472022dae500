package httpapi_test

import (
	"testing"

	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/programs"
)

// A cursor that decodes to bytes Postgres cannot hold as text (invalid UTF-8, NUL) is a 400
// invalid_cursor on every list that reaches a store, never the store's error as a 500.
func TestACursorOfInvalidTextIsRefusedOnEveryList(t *testing.T) {
	f := newConversionsFixture(t)
	svc := programs.NewService(f.db, programs.Options{})
	f.srv.MountPrograms(svc)
	f.srv.MountPartnerships(svc)
	adv, aff := apiKey(f.adv), apiKey(f.aff)
	advSession := f.dashboardAs(t, identity.Advertiser, "owner")
	routes := []struct {
		path    string
		headers map[string]string
	}{
		{"/api/v1/programs", adv}, {"/api/v1/promotions", aff}, {"/api/v1/partnerships", aff},
		{"/api/v1/conversions", adv}, {"/api/v1/commissions", aff},
		{"/api/partner-api/programs", aff}, {"/api/partner-api/commissions", aff},
		{"/api/programs", advSession}, {"/api/partnerships", advSession}, {"/api/conversions", advSession},
		{"/api/payouts", advSession}, {"/api/api-keys", advSession},
	}
	for _, r := range routes {
		for _, cursor := range []string{"garbage", "__8", "_w", "YQBi"} {
			got := f.do(t, "GET", r.path+"?cursor="+cursor, r.headers, "")
			if got.status != 400 || got.problem.Code != "invalid_cursor" {
				t.Errorf("GET %s?cursor=%s = %d %s, want 400 invalid_cursor", r.path, cursor, got.status, got.raw)
			}
		}
	}
}
