package httpapi_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/partnerstream/partnerstream/internal/billing"
	"github.com/partnerstream/partnerstream/internal/health"
	"github.com/partnerstream/partnerstream/internal/httpapi"
)

// brokenBilling fails every event as a store that does not answer would.
type brokenBilling struct{ httpapi.IntegrationService }

func (brokenBilling) ReceiveStripe(context.Context, string, []byte, string) (billing.Outcome, error) {
	return billing.Outcome{}, errors.New("the database did not answer")
}

// The Stripe endpoint's token is a credential: when its request fails, the log names the
// route, never the path that carries the token.
func TestAFailedStripeEventLogsTheRouteNotTheToken(t *testing.T) {
	var logs bytes.Buffer
	srv := httpapi.New(httpapi.Options{Addr: "127.0.0.1:0", Log: slog.New(slog.NewJSONHandler(&logs, nil)), Health: health.NewRegistry()})
	srv.MountIntegrations(brokenBilling{})
	token := "stp_01jd0000000000000000000000" + strings.Repeat("ab", 32)
	r := do(t, srv, "POST", "/api/integrations/stripe/"+token, map[string]string{"Stripe-Signature": "t=1,v1=00"}, `{}`)
	if r.status != 500 {
		t.Fatalf("a failed event: %d %s, want 500 (Stripe sends it again)", r.status, r.raw)
	}
	if strings.Contains(logs.String(), token) || !strings.Contains(logs.String(), "/api/integrations/stripe/:token") {
		t.Fatalf("the log: %s", logs.String())
	}
}
