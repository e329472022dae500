package dashboard_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/partnerstream/partnerstream/internal/httpapi"
	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/trackscript"
)

// A visitor's browser past its address's budget of script clicks gets 429, which the page
// may read (no CORS failure): the script stays quiet, keeps no click, throws nothing, logs no
// error and does not retry.
func TestBrowserTrackingScriptOverBudgetStaysQuiet(t *testing.T) {
	// A year's window, so that the budget does not start afresh during the test: windows are
	// aligned on the clock (internal/ratelimit), and a day's would turn at midnight UTC.
	s := newStack(t, stackOptions{api: func(o *httpapi.Options) {
		o.ScriptAddressLimit = httpapi.RateLimit{Requests: 1, Window: 365 * 24 * time.Hour}
	}})
	ctx := context.Background()
	b := newBrowser(t, s.base, "en", 1280, 900)
	b.run(emulation.SetUserAgentOverride("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/138.0 Safari/537.36"))
	adv, _, err := s.ids.CreateCompany(ctx, identity.NewCompany{Kind: identity.Advertiser, Name: "Budget brand", OwnerEmail: "budget-brand@example.test"})
	if err != nil {
		t.Fatal(err)
	}
	program, code := s.partnerLink(t, adv.ID, "anna@example.test")
	key, _, err := s.ids.CreatePublishableKey(ctx, adv.ID, program, "site")
	if err != nil {
		t.Fatal(err)
	}
	none := ""
	site := brandSite(t, s, &none)
	if _, err := s.script.SetSettings(ctx, adv.ID, program, trackscript.Settings{Origins: []string{site.URL},
		Params: []string{"via"}, Model: trackscript.LastClick}); err != nil {
		t.Fatal(err)
	}

	// What the browser saw of the click endpoint: each request's status, or its failure.
	var mu sync.Mutex
	var requests []network.RequestID
	statuses := map[network.RequestID]int64{}
	failures := map[network.RequestID]string{}
	chromedp.ListenTarget(b.ctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *network.EventRequestWillBeSent:
			if strings.HasSuffix(ev.Request.URL, "/api/script/clicks") {
				requests = append(requests, ev.RequestID)
			}
		case *network.EventResponseReceived:
			statuses[ev.RequestID] = ev.Response.Status
		case *network.EventLoadingFailed:
			failures[ev.RequestID] = ev.ErrorText + " " + string(ev.CorsErrorStatus.CorsError)
		}
	})
	visit := func() (string, []int64, []string) {
		t.Helper()
		mu.Lock()
		from := len(requests)
		mu.Unlock()
		b.run(network.ClearBrowserCookies(), chromedp.Navigate(site.URL+"/?via="+code+"&k="+key), chromedp.WaitReady("body", chromedp.ByQuery))
		id := b.settled()
		// Long enough for a retry to show.
		time.Sleep(time.Second)
		mu.Lock()
		defer mu.Unlock()
		var got []int64
		var failed []string
		for _, r := range requests[from:] {
			got = append(got, statuses[r])
			if f, ok := failures[r]; ok {
				failed = append(failed, f)
			}
		}
		return id, got, failed
	}

	if id, got, failed := visit(); !strings.HasPrefix(id, "clk_") || len(got) != 1 || got[0] != 200 || len(failed) != 0 {
		t.Fatalf("the first visit: click %q, answers %v, failures %v; want a click in one 200", id, got, failed)
	}
	id, got, failed := visit()
	if id != "" || len(got) != 1 || got[0] != 429 || len(failed) != 0 {
		t.Fatalf("a visit past the address's budget: click %q, answers %v, failures %v; want no click, one 429 the page could read", id, got, failed)
	}
	var cookies string
	b.eval(`document.cookie`, &cookies)
	if strings.Contains(cookies, "ps_click_id") {
		t.Fatalf("the refused visit keeps a click cookie: %s", cookies)
	}
}
