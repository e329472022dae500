package ingest

import (
	"context"
	"encoding/json"

	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/enrich"
	"github.com/partnerstream/partnerstream/internal/enrich/enrichtest"
	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/kafka"
	"github.com/partnerstream/partnerstream/internal/testenv"
	"github.com/partnerstream/partnerstream/internal/testenv/chtest"
)

// enrichedRow is a click's columns that enrichment fills (migration 0009), with ip and country.
type enrichedRow struct {
	IP, Country, Region, City, ASOrg, Device, Browser, OS, Referrer, UTMSource, UTMMedium, UTMCampaign string
	ASN                                                                                                uint32
	Hosting                                                                                            uint8
}

const enrichedSelect = "ip, country, region, city, as_org, device_type, browser, os, referrer_domain, utm_source, utm_medium, utm_campaign, asn, hosting"

func readEnriched(t *testing.T, e *env, clickID string) enrichedRow {
	t.Helper()
	var r enrichedRow
	err := e.conn.QueryRow(context.Background(), "SELECT "+enrichedSelect+" FROM "+e.db+".clicks WHERE click_id = ?", clickID).
		Scan(&r.IP, &r.Country, &r.Region, &r.City, &r.ASOrg, &r.Device, &r.Browser, &r.OS, &r.Referrer, &r.UTMSource, &r.UTMMedium, &r.UTMCampaign, &r.ASN, &r.Hosting)
	if err != nil {
		t.Fatalf("click %s: %v", clickID, err)
	}
	return r
}

// Clicks go through the embedded Kafka broker and ingest into real ClickHouse, and come out
// enriched, their addresses truncated.
func TestIngestEnrichesClicks(t *testing.T) {
	e := newEnv(t)
	nets := []enrichtest.Network{
		{CIDR: "203.0.113.0/24", Country: "ES", Region: "Madrid", City: "Madrid", ASN: 64500, Org: "Example Telecom"},
		{CIDR: "2001:db8:1::/48", Country: "DE", Region: "Bavaria", City: "Munich", ASN: 16509, Org: "AMAZON-02"},
	}
	enr, err := enrich.New(enrich.Options{GeoIPDB: enrichtest.GeoLite2City(t, nets...), ASNDB: enrichtest.ASN(t, nets...)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(enr.Close)
	s := e.service(t, Options{BatchInterval: 100 * time.Millisecond, Enrich: enr})
	testenv.Run(t, s)

	at := time.Now().UTC().Truncate(time.Second)
	click := func(id, ip, ua, ref, landing, country string, bot bool) events.Click {
		return events.Click{ClickID: id, OccurredAt: at, LinkID: "lnk_1", ProgramID: "prg_1", AffiliateID: "co_aff", AdvertiserID: "co_adv",
			Visitor: "v_" + id, IP: ip, UserAgent: ua, Referrer: ref, LandingURL: landing, Country: country, IsBot: bot}
	}
	iphone := "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1"
	firefox := "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0"
	cases := []struct {
		click events.Click
		want  enrichedRow
	}{
		{click("clk_es", "203.0.113.77", iphone, "https://news.bbc.co.uk/sport", "https://shop.example/p?utm_source=aff&utm_medium=cpa&utm_campaign=spring", "", false),
			enrichedRow{IP: "203.0.113.0", Country: "ES", Region: "Madrid", City: "Madrid", ASOrg: "Example Telecom", ASN: 64500,
				Device: "mobile", Browser: "Safari", OS: "iOS", Referrer: "bbc.co.uk", UTMSource: "aff", UTMMedium: "cpa", UTMCampaign: "spring"}},
		{click("clk_de", "2001:db8:1:2::3", firefox, "", "https://shop.example/p", "", false),
			enrichedRow{IP: "2001:db8:1::", Country: "DE", Region: "Bavaria", City: "Munich", ASOrg: "AMAZON-02", ASN: 16509, Hosting: 1,
				Device: "desktop", Browser: "Firefox", OS: "Windows"}},
		// The event's own country wins, without the database's region and city; the
		// redirect's bot flag makes the device a bot.
		{click("clk_bot", "203.0.113.8", "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)", "", "", "PT", true),
			enrichedRow{IP: "203.0.113.0", Country: "PT", ASOrg: "Example Telecom", ASN: 64500, Device: "bot"}},
		// Input nothing understands: stored, with empty columns.
		{click("clk_bad", "not-an-address", "\x01garbage(((", "::not a url", "%zz://?utm_source=", "", false),
			enrichedRow{Device: "other"}},
		{click("clk_absent", "100.64.1.2", "", "android-app://com.google.android.gm/", "", "", false),
			enrichedRow{IP: "100.64.1.0", Device: "other"}},
	}
	var msgs []kafka.Record
	for _, tc := range cases {
		body, err := json.Marshal(tc.click)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, kafka.Record{Key: []byte(tc.click.Visitor), Value: body})
	}
	e.produce(t, kafka.TopicClicks, msgs)
	e.waitCaughtUp(t, DefaultGroupPrefix+"-clicks", kafka.TopicClicks, 30*time.Second)
	for _, tc := range cases {
		if got := readEnriched(t, e, tc.click.ClickID); got != tc.want {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.click.ClickID, got, tc.want)
		}
	}
	// No whole address is left anywhere in the table.
	if n := e.count(t, "SELECT count() FROM "+e.db+".clicks WHERE ip IN ('203.0.113.77', '203.0.113.8', '2001:db8:1:2::3', '100.64.1.2')"); n != 0 {
		t.Errorf("%d rows keep a whole address", n)
	}
}

// The columns of migration 0009 have the types the block fills, and Writer.WriteClicks stores
// what it is given.
func TestEnrichedColumnsRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, db, conn := chtest.Migrated(t)
	types := map[string]string{}
	rows, err := conn.Query(ctx, "SELECT name, type FROM system.columns WHERE database = ? AND table = 'clicks'", db)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name, typ string
		if err := rows.Scan(&name, &typ); err != nil {
			t.Fatal(err)
		}
		types[name] = typ
	}
	_ = rows.Close()
	for _, d := range derivedStrings {
		if typ := types[d.column]; typ != "String" && typ != "LowCardinality(String)" {
			t.Errorf("column %s is %q, want a String", d.column, typ)
		}
	}
	if types["asn"] != "UInt32" || types["hosting"] != "UInt8" {
		t.Errorf("asn is %q and hosting %q, want UInt32 and UInt8", types["asn"], types["hosting"])
	}

	c := Click{Click: events.Click{ClickID: "clk_1", AdvertiserID: "co_adv", OccurredAt: time.Now().UTC(), IP: "203.0.113.7"},
		Enriched: enrich.Click{
			Address:  &enrich.Address{Stored: "203.0.113.0", Place: &enrich.Place{Country: "ES", Region: "r", City: "c"}, Network: &enrich.Network{ASN: 7, Org: "o", Hosting: true}},
			Device:   &enrich.Device{Type: "tablet", Browser: "b", OS: "os"},
			Referrer: &enrich.Referrer{Domain: "d.example"}, UTM: &enrich.UTM{Source: "s", Medium: "m", Campaign: "k"}}}
	plain := Click{Click: events.Click{ClickID: "clk_2", AdvertiserID: "co_adv", OccurredAt: time.Now().UTC(), IP: "203.0.113.7"}}
	if _, err := NewWriter(conn, db).WriteClicks(ctx, []Click{c, plain}); err != nil {
		t.Fatal(err)
	}
	e := &env{db: db, conn: conn}
	want := enrichedRow{IP: "203.0.113.0", Country: "ES", Region: "r", City: "c", ASOrg: "o", Device: "tablet", Browser: "b", OS: "os",
		Referrer: "d.example", UTMSource: "s", UTMMedium: "m", UTMCampaign: "k", ASN: 7, Hosting: 1}
	if got := readEnriched(t, e, "clk_1"); got != want {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	// Without enrichment: the address as given, every derived column empty.
	if got := readEnriched(t, e, "clk_2"); got != (enrichedRow{IP: "203.0.113.7"}) {
		t.Errorf("a click written without enrichment reads %+v", got)
	}
}
