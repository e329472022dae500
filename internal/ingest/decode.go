package ingest

import (
	"fmt"
	"time"
	"unsafe"

	"github.com/valyala/fastjson"
)

// clickParser decodes click events, the bulk of what ingest reads. Decoding them into
// events.Click by reflection (encoding/json, then json-iterator) was a large share of
// ingest's CPU (docs/stats.md), most of it allocating one string per field and collecting
// them again. scan reads the
// clicks the platform writes in one pass over their bytes, and fastjson, which parses into a
// reusable tree without allocating, the rest; the click's strings are copied into an arena
// of strings (below).
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
}

// arenaSize is the size of each arena: a fetch's worth of clicks shares a few.
const arenaSize = 256 << 10

// The string fields of a click, as indexes into clickRecord.spans.
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

// clickRecord is a click as ingest carries it from its fetch to its insert: the string
// fields are views of one string, which points into the parser's arena. A batch's records
// then hold a few pointers each rather than sixteen strings: the garbage collector scans
// every pointer of every fetch and batch in hand, which made it a fifth of ingest's CPU.
type clickRecord struct {
	strs      string
	spans     [clickStringFields]span
	at        time.Time
	bot, dup  bool
	partition int32
	offset    int64
}

type span struct{ start, end uint32 }

// field is the string field i (fClickID, ...).
func (r *clickRecord) field(i int) string { return r.strs[r.spans[i].start:r.spans[i].end] }

// newClickRecord is c as a record, for writes that do not come from Kafka (Writer.WriteClicks).
func newClickRecord(c Click) clickRecord {
	fields := [clickStringFields]string{fClickID: c.ClickID, fLinkID: c.LinkID, fProgramID: c.ProgramID,
		fAffiliateID: c.AffiliateID, fAdvertiserID: c.AdvertiserID, fPromotionID: c.PromotionID, fSub1: c.Sub1,
		fSub2: c.Sub2, fSub3: c.Sub3, fSub4: c.Sub4, fSub5: c.Sub5, fIP: c.IP, fUserAgent: c.UserAgent,
		fReferrer: c.Referrer, fCountry: c.Country}
	r := clickRecord{at: c.OccurredAt, bot: c.IsBot, dup: c.IsDuplicate, partition: c.Partition, offset: c.Offset}
	var strs []byte
	for i, f := range fields {
		r.spans[i] = span{uint32(len(strs)), uint32(len(strs) + len(f))}
		strs = append(strs, f...)
	}
	r.strs = string(strs)
	return r
}

// valid reports what makes a click unusable for statistics.
func (r *clickRecord) valid() error {
	if r.field(fClickID) == "" || r.field(fAdvertiserID) == "" || r.at.IsZero() {
		return fmt.Errorf("%w: click %q: click id, advertiser id and occurred_at are required", ErrInvalid, r.field(fClickID))
	}
	return nil
}

// parse decodes one click event into r. A null value leaves its field empty, as
// encoding/json does; a value of the wrong type is an error.
func (cp *clickParser) parse(data []byte, r *clickRecord) error {
	// A click's strings, unescaped, are never longer than its message: they fit in the arena
	// without growing it, which would move the bytes earlier clicks' strings point into.
	if cap(cp.arena)-len(cp.arena) < len(data) {
		cp.arena = make([]byte, 0, max(arenaSize, len(data)))
	}
	start := len(cp.arena)
	*r = clickRecord{}
	if cp.scan(data, r, start) {
		cp.seal(r, start)
		return nil
	}
	cp.arena = cp.arena[:start]
	*r = clickRecord{}
	return cp.parseTree(data, r, start)
}

// parseTree decodes with fastjson what scan does not take, and is what decides the errors.
func (cp *clickParser) parseTree(data []byte, r *clickRecord, start int) error {
	v, err := cp.p.ParseBytes(data)
	if err != nil {
		return err
	}
	o, err := v.Object()
	if err != nil {
		return err
	}
	o.Visit(func(key []byte, v *fastjson.Value) {
		if err != nil || v.Type() == fastjson.TypeNull {
			return
		}
		k := clickKey(key)
		if k >= 0 {
			s, serr := v.StringBytes()
			if serr != nil {
				err = fmt.Errorf("%s: %w", key, serr)
				return
			}
			r.spans[k] = span{uint32(len(cp.arena) - start), uint32(len(cp.arena) - start + len(s))}
			cp.arena = append(cp.arena, s...)
			return
		}
		switch k {
		case keyOccurredAt:
			s, serr := v.StringBytes()
			if serr == nil {
				serr = r.at.UnmarshalText(s)
			}
			if serr != nil {
				err = fmt.Errorf("occurred_at: %w", serr)
			}
		case keyIsBot:
			r.bot, err = boolField(key, v)
		case keyIsDuplicate:
			r.dup, err = boolField(key, v)
		}
	})
	if err != nil {
		cp.arena = cp.arena[:start] // no string points there yet
		*r = clickRecord{}
		return err
	}
	cp.seal(r, start)
	return nil
}

// seal makes what the click appended to the arena from start on its strings.
func (cp *clickParser) seal(r *clickRecord, start int) {
	if n := len(cp.arena) - start; n > 0 {
		r.strs = unsafe.String(&cp.arena[start], n)
	}
}

func boolField(key []byte, v *fastjson.Value) (bool, error) {
	b, err := v.Bool()
	if err != nil {
		return false, fmt.Errorf("%s: %w", key, err)
	}
	return b, nil
}
