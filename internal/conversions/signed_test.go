package conversions_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/clickid"
	"github.com/partnerstream/partnerstream/internal/conversions"
	"github.com/partnerstream/partnerstream/internal/ids"
)

// link inserts a tracking link of affiliate in program directly (internal/links owns the
// real routes) and returns its id.
func (e *env) link(t testing.TB, program, affiliate, partnership string) string {
	t.Helper()
	id := ids.New(ids.Link)
	code := fmt.Sprintf("%016x", time.Now().UnixNano())
	if _, err := e.db.Exec(context.Background(), `INSERT INTO tracking_links (id, code, partnership_id, program_id, affiliate_id,
		advertiser_id) SELECT $1, $2, $3, id, $4, advertiser_id FROM programs WHERE id = $5`, id, code, partnership, affiliate, program); err != nil {
		t.Fatal(err)
	}
	return id
}

func clickIDKeys(t testing.TB) clickid.Keys {
	t.Helper()
	ks, err := clickid.ParseKeys(clickid.GenerateKeySpec())
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

func mint(t testing.TB, ks clickid.Keys, link string, at time.Time) string {
	t.Helper()
	id, err := ks.Mint(link, at)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// A signed click id is attributed from the id and the link in Postgres alone: a conversion a
// millisecond after its click (or in the same one) is registered while the click store does
// not even answer.
func TestASignedClickIsAttributedAtOnceWithoutTheClickStore(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ks := clickIDKeys(t)
	svc := conversions.New(e.db, conversions.Options{Now: e.clock.Now, ClickIDs: ks})
	link := e.link(t, e.program, e.aff, e.ptn)
	now := e.clock.Now().Add(123 * time.Millisecond)
	e.clock.Set(now)
	for i, clickAt := range []time.Time{now.Add(-time.Millisecond), now} {
		clk := mint(t, ks, link, clickAt)
		c, created, err := svc.Register(context.Background(), e.adv, conversions.NewConversion{ClickID: clk, ExternalID: fmt.Sprint("o", i), Amount: "10.00"})
		if err != nil || !created {
			t.Fatalf("click %s before: Register = %v, created %v", now.Sub(clickAt), err, created)
		}
		if c.ClickID != clk || c.LinkID != link || c.ProgramID != e.program || c.AffiliateID != e.aff || c.PartnershipID != e.ptn ||
			!c.ClickedAt.Equal(clickAt) || c.Commission.Amount != 100 {
			t.Fatalf("attributed to %+v", c)
		}
	}
	// A conversion dated in whole seconds, in the click's own second, is not before it.
	clk := mint(t, ks, link, now)
	if _, _, err := svc.Register(context.Background(), e.adv, conversions.NewConversion{ClickID: clk, ExternalID: "whole-second",
		OccurredAt: now.Truncate(time.Second)}); err != nil {
		t.Fatalf("a conversion in the click's second: %v", err)
	}
}

// Forged, altered, foreign and unknown signed ids all get the very same error, and neither
// "not ready" nor "unavailable": the id is the click, and nothing tells one advertiser whether
// another's click exists.
func TestEveryBadSignedClickIsTheSameUnknownClick(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ks := clickIDKeys(t)
	svc := conversions.New(e.db, conversions.Options{Now: e.clock.Now, ClickIDs: ks})
	now := e.clock.Now()
	link := e.link(t, e.program, e.aff, e.ptn)
	other := e.company(t, "advertiser")
	otherProgram := e.newProgram(t, other, "EUR", "fixed", 100, nil)
	foreignLink := e.link(t, otherProgram, e.aff, e.partner(t, otherProgram, e.aff, "", 0))
	good := mint(t, ks, link, now)
	altered := []byte(good)
	altered[20] = ids.Alphabet[(indexOf(altered[20])+1)%32]
	cases := map[string]string{
		"forged (another key)":              mint(t, clickIDKeys(t), link, now),
		"altered in one character":          string(altered),
		"of another advertiser's link":      mint(t, ks, foreignLink, now),
		"of a link that does not exist":     mint(t, ks, ids.New(ids.Link), now),
		"signed, but no key configured now": "",
	}
	for name, clk := range cases {
		svc := svc
		if clk == "" {
			clk, svc = good, conversions.New(e.db, conversions.Options{Now: e.clock.Now})
		}
		_, _, err := svc.Register(context.Background(), e.adv, conversions.NewConversion{ClickID: clk, ExternalID: name})
		if !errors.Is(err, conversions.ErrUnknownClick) {
			t.Fatalf("%s: Register = %v, want ErrUnknownClick", name, err)
		}
		// The message names the id the caller sent and nothing else.
		if msg := fmt.Sprintf("unknown click: no click %s", clk); err.Error() != msg {
			t.Fatalf("%s: %q, want %q", name, err, msg)
		}
	}
	if n := e.count(t, `SELECT count(*) FROM conversions`); n != 0 {
		t.Fatalf("refused conversions left %d rows", n)
	}
	// The advertiser's own link is attributed by the same service: the refusals above are not
	// a broken service.
	if _, _, err := svc.Register(context.Background(), e.adv, conversions.NewConversion{ClickID: good, ExternalID: "ok"}); err != nil {
		t.Fatal(err)
	}
}

func TestASignedClickOutsideTheWindowIsExpiredAndOldKeysStillVerify(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	oldSpec, newSpec := clickid.GenerateKeySpec(), clickid.GenerateKeySpec()
	old, err := clickid.ParseKeys(oldSpec)
	if err != nil {
		t.Fatal(err)
	}
	rotated, err := clickid.ParseKeys(newSpec + "," + oldSpec)
	if err != nil {
		t.Fatal(err)
	}
	svc := conversions.New(e.db, conversions.Options{Now: e.clock.Now, ClickIDs: rotated})
	link := e.link(t, e.program, e.aff, e.ptn)
	now := e.clock.Now()
	if _, _, err := svc.Register(context.Background(), e.adv, conversions.NewConversion{ClickID: mint(t, old, link, now.Add(-29*24*time.Hour)), ExternalID: "old-key"}); err != nil {
		t.Fatalf("an id of the old key, 29 days old: %v", err)
	}
	if _, _, err := svc.Register(context.Background(), e.adv, conversions.NewConversion{ClickID: mint(t, rotated, link, now.Add(-30*24*time.Hour-time.Second)), ExternalID: "late"}); !errors.Is(err, conversions.ErrClickExpired) {
		t.Fatalf("a click 30 days and a second ago: %v, want ErrClickExpired", err)
	}
	if _, _, err := svc.Register(context.Background(), e.adv, conversions.NewConversion{ClickID: mint(t, rotated, link, now.Add(time.Second)), ExternalID: "early",
		OccurredAt: now}); !errors.Is(err, conversions.ErrClickExpired) {
		t.Fatalf("a conversion before its click: %v, want ErrClickExpired", err)
	}
}

func indexOf(b byte) int { return strings.IndexByte(ids.Alphabet, b) }
