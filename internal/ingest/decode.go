package ingest

import (
	"fmt"
	"unsafe"

	"github.com/valyala/fastjson"

	"github.com/partnerstream/partnerstream/internal/events"
)

// clickParser decodes click events, the bulk of what ingest reads. Decoding them into
// events.Click by reflection (encoding/json, then json-iterator) took a third of ingest's
// CPU, most of it allocating one string per field and collecting them again. fastjson parses
// into a reusable arena without allocating; the click's strings are then copied into an
// arena of strings (below).
//
// It reads what encoding/json would read into events.Click, except that keys must match
// exactly (encoding/json also accepts them in another case; the platform never writes them
// so) and landing_url, which statistics do not store, is skipped. A parser is not safe for
// concurrent use: each partition's fetcher has its own.
//
// The strings of the clicks are views of an arena the parser fills and never writes again:
// one allocation per arenaSize of clicks rather than one per click, which the garbage
// collector had to track and free one by one.
type clickParser struct {
	p     fastjson.Parser
	arena []byte
	spans [clickStringFields]span
}

// arenaSize is the size of each arena: a fetch's worth of clicks shares a few.
const arenaSize = 256 << 10

type span struct{ start, end int }

// The string fields of a click, as indexes into clickParser.spans.
const (
	fClickID = iota
	fLinkID
	fProgramID
	fAffiliateID
	fAdvertiserID
	fPromotionID
	fSub1
	fSub2
	fSub3
	fSub4
	fSub5
	fIP
	fUserAgent
	fReferrer
	fCountry
	clickStringFields
)

var clickStringKeys = map[string]int{
	"click_id": fClickID, "link_id": fLinkID, "program_id": fProgramID, "affiliate_id": fAffiliateID,
	"advertiser_id": fAdvertiserID, "promotion_id": fPromotionID, "sub1": fSub1, "sub2": fSub2, "sub3": fSub3,
	"sub4": fSub4, "sub5": fSub5, "ip": fIP, "user_agent": fUserAgent, "referrer": fReferrer, "country": fCountry,
}

// parse decodes one click event. A null value leaves its field empty, as encoding/json does;
// a value of the wrong type is an error.
func (cp *clickParser) parse(data []byte) (events.Click, error) {
	var c events.Click
	v, err := cp.p.ParseBytes(data)
	if err != nil {
		return c, err
	}
	o, err := v.Object()
	if err != nil {
		return c, err
	}
	// A click's strings, unescaped, are never longer than its message: they fit in the arena
	// without growing it, which would move the bytes earlier clicks' strings point into.
	if cap(cp.arena)-len(cp.arena) < len(data) {
		cp.arena = make([]byte, 0, max(arenaSize, len(data)))
	}
	start := len(cp.arena)
	cp.spans = [clickStringFields]span{}
	o.Visit(func(key []byte, v *fastjson.Value) {
		if err != nil || v.Type() == fastjson.TypeNull {
			return
		}
		if i, ok := clickStringKeys[string(key)]; ok {
			s, serr := v.StringBytes()
			if serr != nil {
				err = fmt.Errorf("%s: %w", key, serr)
				return
			}
			cp.spans[i] = span{len(cp.arena) - start, len(cp.arena) - start + len(s)}
			cp.arena = append(cp.arena, s...)
			return
		}
		switch string(key) {
		case "occurred_at":
			s, serr := v.StringBytes()
			if serr == nil {
				serr = c.OccurredAt.UnmarshalText(s)
			}
			if serr != nil {
				err = fmt.Errorf("occurred_at: %w", serr)
			}
		case "is_bot":
			c.IsBot, err = boolField(key, v)
		case "is_duplicate":
			c.IsDuplicate, err = boolField(key, v)
		}
	})
	if err != nil {
		cp.arena = cp.arena[:start] // no string points there yet
		return events.Click{}, err
	}
	all := ""
	if n := len(cp.arena) - start; n > 0 {
		all = unsafe.String(&cp.arena[start], n)
	}
	str := func(i int) string { return all[cp.spans[i].start:cp.spans[i].end] }
	c.ClickID, c.LinkID, c.ProgramID, c.AffiliateID = str(fClickID), str(fLinkID), str(fProgramID), str(fAffiliateID)
	c.AdvertiserID, c.PromotionID = str(fAdvertiserID), str(fPromotionID)
	c.Sub1, c.Sub2, c.Sub3, c.Sub4, c.Sub5 = str(fSub1), str(fSub2), str(fSub3), str(fSub4), str(fSub5)
	c.IP, c.UserAgent, c.Referrer, c.Country = str(fIP), str(fUserAgent), str(fReferrer), str(fCountry)
	return c, nil
}

func boolField(key []byte, v *fastjson.Value) (bool, error) {
	b, err := v.Bool()
	if err != nil {
		return false, fmt.Errorf("%s: %w", key, err)
	}
	return b, nil
}
