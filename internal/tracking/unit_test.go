package tracking

import (
	"fmt"
	"hash/maphash"
	"strings"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/clickid"
	"github.com/partnerstream/partnerstream/internal/links"
)

func TestLandingAddsTheClickParameterAndKeepsTheRest(t *testing.T) {
	cases := []struct {
		name, raw, param, want string
	}{
		{"a URL without a query", "https://shop.test/p", "ps_click_id", "https://shop.test/p?ps_click_id=clk_1"},
		{"the existing query is kept byte for byte", "https://shop.test/p?b=2&a=%20x&flag", "ps_click_id", "https://shop.test/p?b=2&a=%20x&flag&ps_click_id=clk_1"},
		{"an earlier click id is replaced", "https://shop.test/?ps_click_id=old&x=1", "ps_click_id", "https://shop.test/?x=1&ps_click_id=clk_1"},
		{"an encoded earlier click id is replaced", "https://shop.test/?ps%5Fclick%5Fid=old", "ps_click_id", "https://shop.test/?ps_click_id=clk_1"},
		{"the fragment stays last", "https://shop.test/p?x=1#section", "ps_click_id", "https://shop.test/p?x=1&ps_click_id=clk_1#section"},
		{"the program's parameter name is used", "https://shop.test/", "aff_click", "https://shop.test/?aff_click=clk_1"},
		{"an empty query is not kept", "https://shop.test/?", "c", "https://shop.test/?c=clk_1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := newLanding(c.raw, c.param)
			if got := l.head + "clk_1" + l.tail; got != c.want {
				t.Fatalf("got %s\nwant %s", got, c.want)
			}
			if l.plain != c.raw {
				t.Fatalf("plain %s", l.plain)
			}
		})
	}
}

func TestDestinationPrefersARunningPromotionThenTheLinkThenTheProgram(t *testing.T) {
	start := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	end := start.Add(24 * time.Hour)
	base := links.Target{ClickParam: "ps_click_id", ProgramLandingURL: "https://shop.test/", LinkStatus: "active", ProgramStatus: "active", PartnershipStatus: "approved"}
	withDest := base
	withDest.DestinationURL = "https://shop.test/dest"
	withPromo := withDest
	withPromo.PromotionLandingURL, withPromo.PromotionStartsAt, withPromo.PromotionEndsAt = "https://shop.test/sale", &start, &end
	cases := []struct {
		name   string
		target links.Target
		at     time.Time
		want   string
	}{
		{"the program's landing page by default", base, start, "https://shop.test/"},
		{"the link's destination over the program's", withDest, start, "https://shop.test/dest"},
		{"a running promotion over both", withPromo, start.Add(time.Hour), "https://shop.test/sale"},
		{"not before the promotion starts", withPromo, start.Add(-time.Second), "https://shop.test/dest"},
		{"not once it has ended", withPromo, end, "https://shop.test/dest"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := newDestination(c.target)
			if got := d.Landing(c.at); got != c.want {
				t.Fatalf("Landing = %s, want %s", got, c.want)
			}
			if got := string(d.pick(c.at).appendLocation(nil, "clk_x")); got != c.want+"?ps_click_id=clk_x" {
				t.Fatalf("Location = %s", got)
			}
		})
	}
}

// Two replicas with the same keys say the same visitor for the same visit, and a visitor is
// the same whether it brings the cookie it was handed or not, within the hour.
func TestVisitorsAgreeAcrossReplicasAndKeepTheCookiesVisitor(t *testing.T) {
	key := newKeys(t)
	a, b := newVisitors(key.VisitorKey()), newVisitors(key.VisitorKey())
	const hour = 493_000
	cookie := a.cookie("192.0.2.1", "UA", hour)
	if !validVisitorID(string(cookie[:])) {
		t.Fatalf("the made cookie %q is not a valid visitor id", cookie)
	}
	if b.cookie("192.0.2.1", "UA", hour) != cookie {
		t.Fatal("two replicas made different cookies for one visit")
	}
	if a.id(&cookie) != b.id(&cookie) {
		t.Fatal("two replicas hashed one cookie differently")
	}
	if id := a.id(&cookie); id == string(cookie[:]) || !validVisitorID(id) {
		t.Fatalf("the click carries %q for cookie %q: want a hash of the cookie's shape", id, cookie)
	}
	others := []struct {
		name   string
		ip, ua string
		hour   int64
	}{
		{"another address", "192.0.2.2", "UA", hour},
		{"another user agent", "192.0.2.1", "UA2", hour},
		{"another split of the same bytes", "192.0.2.", "1UA", hour},
		{"the next hour", "192.0.2.1", "UA", hour + 1},
	}
	for _, o := range others {
		if a.cookie(o.ip, o.ua, o.hour) == cookie {
			t.Errorf("%s made the same cookie", o.name)
		}
	}
	other := newVisitors(newKeys(t).VisitorKey())
	if other.cookie("192.0.2.1", "UA", hour) == cookie || other.id(&cookie) == a.id(&cookie) {
		t.Error("another key made the same cookie or hash")
	}
}

func TestIsBot(t *testing.T) {
	cases := []struct {
		ua   string
		want bool
	}{
		{"", true},
		{"   ", true},
		{"Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", true},
		{"Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)", true},
		{"facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)", true},
		{"Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)", true},
		{"curl/8.5.0", true},
		{"python-requests/2.31.0", true},
		{"Go-http-client/1.1", true},
		{"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/120.0.0.0 Safari/537.36", true},
		{"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36", false},
		{"Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1", false},
		{"Mozilla/5.0 (Linux; Android 9; CUBOT_X19 Build/PPR1.180610.011) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/90.0 Mobile Safari/537.36", false},
		{"Mozilla/5.0 (Linux; Android 13) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Mobile Safari/537.36 [Pinterest/Android]", false},
		{"Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 [FBAN/FBIOS;FBAV/450.0]", false},
	}
	// The second pass answers from the cache of verdicts.
	for pass := range 2 {
		for _, c := range cases {
			if got := IsBot(c.ua); got != c.want {
				t.Errorf("pass %d: IsBot(%q) = %v, want %v", pass+1, c.ua, got, c.want)
			}
		}
	}
}

// The cache of verdicts keeps each text's own answer, also when texts share a slot.
func TestVerdictCacheAnswersPerText(t *testing.T) {
	c := &verdictCache{seed: maphash.MakeSeed()}
	texts := make([]string, 20_000) // five per slot on average: slots are overwritten
	for i := range texts {
		texts[i] = fmt.Sprintf("Mozilla/5.0 client %d", i)
		if i%3 == 0 {
			texts[i] += " Googlebot/2.1"
		}
	}
	for pass := range 3 {
		for i, text := range texts {
			if got, want := c.match(text), i%3 == 0; got != want {
				t.Fatalf("pass %d: match(%q) = %v, want %v", pass+1, text, got, want)
			}
		}
	}
}

func TestCutNeverSplitsACharacter(t *testing.T) {
	if got := cut("aé", 2); got != "a" {
		t.Fatalf("cut = %q", got)
	}
	if got := cutRunes(strings.Repeat("é", 300), 255); got != strings.Repeat("é", 255) {
		t.Fatalf("cutRunes kept %d characters", len([]rune(got)))
	}
	if got := cutRunes("short", 255); got != "short" {
		t.Fatalf("cutRunes = %q", got)
	}
}

// FuzzBotMatcher holds the automaton to the obvious definition: some marker is a substring
// of the lowercased user agent.
func FuzzBotMatcher(f *testing.F) {
	f.Add("Mozilla/5.0 (compatible; Googlebot/2.1)")
	f.Add("xxcurl/yy")
	f.Add("CRAWLERS spIDer é bot;")
	f.Fuzz(func(t *testing.T, ua string) {
		want := false
		lower := strings.Map(func(r rune) rune {
			if r >= 'A' && r <= 'Z' {
				return r + 'a' - 'A'
			}
			return r
		}, ua)
		for _, m := range botMarkers {
			want = want || strings.Contains(lower, m)
		}
		if got := bots.match(ua); got != want {
			t.Fatalf("match(%q) = %v, want %v", ua, got, want)
		}
	})
}

func newKeys(t *testing.T) clickid.Keys {
	t.Helper()
	ks, err := clickid.ParseKeys(clickid.GenerateKeySpec())
	if err != nil {
		t.Fatal(err)
	}
	return ks
}
