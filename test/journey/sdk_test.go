package journey

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	partnerstream "github.com/partnerstream/partnerstream/sdk/go"
)

// sdkJourney is what an SDK's journey created, for the test to check through the API itself.
type sdkJourney struct {
	ProgramID    string `json:"program_id"`
	ClickID      string `json:"click_id"`
	ConversionID string `json:"conversion_id"`
	Clicks       int    `json:"clicks"`
	Conversions  int    `json:"conversions"`
	// What the SDK's helpers did against the API: the order sent again with its
	// Idempotency-Key was answered as the first (Idempotent-Replayed), a bad amount was an
	// error naming the field, and a list of two links was walked one per page.
	Replayed     bool   `json:"replayed"`
	InvalidField string `json:"invalid_field"`
	Links        int    `json:"links"`
}

// TestSDKJourneys plays the journey of docs/sdk.md through each SDK (sdk/go in this process,
// sdk/typescript under Node) against one platform, so that a change to the API that breaks a
// client fails the build: a program, a partnership approved, a link, a click, a conversion
// with the click id, and the statistics until the conversion shows.
func TestSDKJourneys(t *testing.T) {
	start := time.Now()
	s := newStack(t)
	adv := s.signUp("advertiser", "SDK Shoes")
	aff := s.signUp("affiliate", "SDK Blog")
	t.Logf("platform started and two companies signed up: %s", time.Since(start).Round(time.Millisecond))

	t.Run("go", func(t *testing.T) {
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		j, err := goJourney(ctx, s.baseURL, adv, aff)
		if err != nil {
			t.Fatalf("Go SDK journey: %v", err)
		}
		t.Logf("Go SDK journey: %s", time.Since(start).Round(time.Millisecond))
		s.checkSDKJourney(t, adv, j)
	})

	t.Run("typescript", func(t *testing.T) {
		start := time.Now()
		dist := buildTypeScriptSDK(t)
		built := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "node", filepath.Join(dist, "examples", "journey.js"))
		cmd.Env = append(os.Environ(),
			"PARTNERSTREAM_BASE_URL="+s.baseURL,
			"PARTNERSTREAM_ADVERTISER_SESSION="+adv.Session,
			"PARTNERSTREAM_ADVERTISER_KEY="+adv.APIKey,
			"PARTNERSTREAM_AFFILIATE_KEY="+aff.APIKey)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("TypeScript SDK journey: %v\n%s%s", err, stdout.Bytes(), stderr.Bytes())
		}
		var j sdkJourney
		if err := json.Unmarshal(stdout.Bytes(), &j); err != nil {
			t.Fatalf("TypeScript SDK journey printed %q: %v", stdout.Bytes(), err)
		}
		t.Logf("TypeScript SDK: build %s, journey under Node %s", built.Sub(start).Round(time.Millisecond), time.Since(built).Round(time.Millisecond))
		s.checkSDKJourney(t, adv, j)
	})
}

// checkSDKJourney reads the conversion a journey reported through the API, without the SDKs:
// it is the advertiser's, in the journey's program, attributed to the journey's click.
func (s *stack) checkSDKJourney(t *testing.T, adv *company, j sdkJourney) {
	t.Helper()
	if j.Clicks < 1 || j.Conversions < 1 {
		t.Errorf("the journey's statistics: %d clicks, %d conversions, want at least 1 of each", j.Clicks, j.Conversions)
	}
	if !j.Replayed {
		t.Error("the order sent again with its Idempotency-Key was not answered as the first")
	}
	if j.InvalidField != "amount" {
		t.Errorf("a bad amount's error names %q, want amount", j.InvalidField)
	}
	if j.Links != 2 {
		t.Errorf("walking the program's links one per page found %d, want 2", j.Links)
	}
	var c struct {
		ProgramID string  `json:"program_id"`
		ClickID   *string `json:"click_id"`
		Amount    string  `json:"amount"`
	}
	s.call(apiCall{method: "GET", path: "/api/v1/conversions/" + url.PathEscape(j.ConversionID), as: adv, auth: "key"}, &c, http.StatusOK)
	if c.ProgramID != j.ProgramID || c.ClickID == nil || *c.ClickID != j.ClickID || c.Amount != "42.00" {
		t.Errorf("conversion %s: program %s, click %v, amount %s; want program %s, click %s, amount 42.00",
			j.ConversionID, c.ProgramID, c.ClickID, c.Amount, j.ProgramID, j.ClickID)
	}
}

// buildTypeScriptSDK compiles sdk/typescript and its examples (hack/sdk.sh build: npm ci once
// per lock file, then tsc) and returns the directory of the JavaScript.
func buildTypeScriptSDK(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "hack/sdk.sh", "build")
	cmd.Dir = repoRoot()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hack/sdk.sh build: %v\n%s", err, stderr.Bytes())
	}
	return string(bytes.TrimSpace(out))
}

// goJourney is the journey of sdk/typescript/examples/journey.ts written with the Go SDK.
func goJourney(ctx context.Context, baseURL string, adv, aff *company) (sdkJourney, error) {
	var j sdkJourney
	dashboard, err := partnerstream.New(baseURL, adv.Session)
	if err != nil {
		return j, err
	}
	advertiser, err := partnerstream.New(baseURL, adv.APIKey)
	if err != nil {
		return j, err
	}
	affiliate, err := partnerstream.New(baseURL, aff.APIKey)
	if err != nil {
		return j, err
	}

	prg, err := dashboard.CreateProgramWithResponse(ctx, &partnerstream.CreateProgramParams{IdempotencyKey: partnerstream.NewIdempotencyKey()},
		partnerstream.ProgramInput{
			Name: "SDK journey (Go)", LandingUrl: "https://shop.example/landing", Currency: "EUR",
			Commission: partnerstream.ProgramCommissionRuleInput{Type: partnerstream.ProgramCommissionRuleInputTypePercent, Percent: new("10")},
			Visibility: new(partnerstream.ProgramInputVisibilityApproval),
		})
	if err := partnerstream.Check(prg, err); err != nil {
		return j, fmt.Errorf("create program: %w", err)
	}
	j.ProgramID = prg.JSON201.Id

	applied, err := affiliate.V1ApplyToProgramWithResponse(ctx, nil, partnerstream.PartnershipApplication{ProgramId: j.ProgramID})
	if err := partnerstream.Check(applied, err); err != nil {
		return j, fmt.Errorf("apply to the program: %w", err)
	}
	ptn := applied.JSON201
	if ptn == nil {
		ptn = applied.JSON200
	}
	approved, err := dashboard.ApprovePartnershipWithResponse(ctx, ptn.Id)
	if err := partnerstream.Check(approved, err); err != nil {
		return j, fmt.Errorf("approve the partnership: %w", err)
	}
	if approved.JSON200.Status != partnerstream.PartnershipStatusApproved {
		return j, fmt.Errorf("partnership %s is %s after approving it", ptn.Id, approved.JSON200.Status)
	}

	link, err := affiliate.V1CreateTrackingLinkWithResponse(ctx, nil, partnerstream.TrackingLinkInput{ProgramId: j.ProgramID, Sub1: new("sdk-go")})
	if err := partnerstream.Check(link, err); err != nil {
		return j, fmt.Errorf("create a tracking link: %w", err)
	}

	// A visitor follows the link, with a browser's user agent (tools' agents are counted as
	// bots), and is redirected to the landing page with the click id. The redirect is not
	// followed: the landing page is the brand's.
	visitor, err := partnerstream.NewClientWithResponses(baseURL, partnerstream.WithHTTPClient(browserClient(nil, nil)))
	if err != nil {
		return j, err
	}
	click, err := visitor.FollowTrackingLinkWithResponse(ctx, link.JSON201.Code, nil, func(_ context.Context, req *http.Request) error {
		req.Header.Set("User-Agent", browserAgent("sdk-go"))
		return nil
	})
	if err := partnerstream.Check(click, err); err != nil {
		return j, fmt.Errorf("follow %s: %w", link.JSON201.Url, err)
	}
	if click.Headers302 == nil {
		return j, fmt.Errorf("follow %s: status %d, want a 302 redirect", link.JSON201.Url, click.StatusCode())
	}
	landing, err := url.Parse(click.Headers302.Location)
	if err != nil {
		return j, fmt.Errorf("the redirect's Location: %w", err)
	}
	j.ClickID = landing.Query().Get("ps_click_id")
	if j.ClickID == "" {
		return j, fmt.Errorf("no ps_click_id in the redirect to %s", landing)
	}

	// The order, retried with the same Idempotency-Key while the platform is busy (503).
	order := &partnerstream.V1RegisterConversionParams{IdempotencyKey: partnerstream.NewIdempotencyKey()}
	conv := partnerstream.ConversionInput{ClickId: &j.ClickID, ExternalId: "order-" + j.ClickID,
		Amount: partnerstream.Amount("42.00"), Type: new(partnerstream.ConversionInputTypeSale)}
	for attempt := 1; ; attempt++ {
		res, err := advertiser.V1RegisterConversionWithResponse(ctx, order, conv)
		if err == nil && res.StatusCode() == http.StatusServiceUnavailable && attempt < 20 {
			time.Sleep(500 * time.Millisecond)
			continue
		}
		if err := partnerstream.Check(res, err); err != nil {
			return j, fmt.Errorf("register the conversion: %w", err)
		}
		created := res.JSON201
		if created == nil {
			created = res.JSON200
		}
		j.ConversionID = created.Id
		break
	}

	if err := goHelpers(ctx, advertiser, affiliate, order, conv, &j); err != nil {
		return j, err
	}

	// The statistics come from ClickHouse, which the click and the conversion reach a moment
	// after the API answered.
	for {
		stats, err := advertiser.V1GetStatsWithResponse(ctx, &partnerstream.V1GetStatsParams{ProgramId: &j.ProgramID})
		if err := partnerstream.Check(stats, err); err != nil {
			return j, fmt.Errorf("statistics: %w", err)
		}
		j.Clicks, j.Conversions = stats.JSON200.Totals.Clicks, stats.JSON200.Totals.Conversions.Total
		if j.Clicks >= 1 && j.Conversions >= 1 {
			return j, nil
		}
		select {
		case <-ctx.Done():
			return j, errors.Join(fmt.Errorf("the conversion is not in the statistics: %d clicks, %d conversions", j.Clicks, j.Conversions), ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// goHelpers is what an integration relies on, through the SDK's helpers against the API: the
// order sent again with its key, a bad amount, and the program's links walked one per page.
func goHelpers(ctx context.Context, advertiser, affiliate *partnerstream.ClientWithResponses,
	order *partnerstream.V1RegisterConversionParams, conv partnerstream.ConversionInput, j *sdkJourney) error {
	again, err := advertiser.V1RegisterConversionWithResponse(ctx, order, conv)
	if err := partnerstream.Check(again, err); err != nil {
		return fmt.Errorf("the order again: %w", err)
	}
	j.Replayed = again.JSON201 != nil && again.JSON201.Id == j.ConversionID && again.HTTPResponse.Header.Get("Idempotent-Replayed") == "true"

	bad := conv
	bad.ExternalId, bad.Amount = "order-bad", partnerstream.Amount("abc")
	res, err := advertiser.V1RegisterConversionWithResponse(ctx, nil, bad)
	var apiErr *partnerstream.APIError
	if err := partnerstream.Check(res, err); !errors.As(err, &apiErr) || apiErr.Problem.Errors == nil {
		return fmt.Errorf("a bad amount: %v, want an APIError naming the field", err)
	}
	for _, fe := range *apiErr.Problem.Errors {
		j.InvalidField = fe.Field
	}

	second, err := affiliate.V1CreateTrackingLinkWithResponse(ctx, nil, partnerstream.TrackingLinkInput{ProgramId: j.ProgramID, Sub1: new("sdk-go-2")})
	if err := partnerstream.Check(second, err); err != nil {
		return fmt.Errorf("a second tracking link: %w", err)
	}
	for l, err := range partnerstream.All(ctx, func(ctx context.Context, cursor *partnerstream.Cursor) ([]partnerstream.TrackingLink, string, error) {
		page, err := affiliate.V1ListTrackingLinksWithResponse(ctx, &partnerstream.V1ListTrackingLinksParams{ProgramId: &j.ProgramID, Limit: new(1), Cursor: cursor})
		if err := partnerstream.Check(page, err); err != nil {
			return nil, "", err
		}
		return page.JSON200.Data, page.JSON200.NextCursor, nil
	}) {
		if err != nil {
			return fmt.Errorf("walk the tracking links: %w", err)
		}
		if l.ProgramId == j.ProgramID {
			j.Links++
		}
	}
	return nil
}
