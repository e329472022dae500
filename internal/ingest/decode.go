package ingest

import (
	"fmt"
	"time"
	"unsafe"

	"github.com/valyala/fastjson"

	"github.com/partnerstream/partnerstream/internal/enrich"
	"github.com/partnerstream/partnerstream/internal/events"
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
// so) and fields without a column (events.ClickFields), such as landing_url, are skipped. A
// parser is not safe for concurrent use: each partition of a generation has its own.
//
// The strings of the clicks are views of an arena the parser fills and never writes again:
// one allocation per arenaSize of clicks rather than one per click, which the garbage
// collector had to track and free one by one.
type clickParser struct {
	p     fastjson.Parser
	arena []byte
	last  int // where the strings of the click parsed last start in arena
}

// arenaSize is the size of each arena: a fetch's worth of clicks shares a few.
const arenaSize = 256 << 10

// clickRecord is a click as ingest carries it from its fetch to its insert: the string
// fields are views of one string, which points into the parser's arena. A batch's records
// then hold a few pointers each rather than sixteen strings: the garbage collector scans
// every pointer of every fetch and batch in hand, which made it a fifth of ingest's CPU.
// The arrays are indexed by events.ClickField, each filled at the fields of its kind; the
// time field (there is one) is at. enriched is what internal/enrich derived: pointers to
// values shared by every click with the same address, user agent, referrer or landing URL.
type clickRecord struct {
	strs      string
	spans     [events.NumClickFields]span
	at        time.Time
	bools     [events.NumClickFields]bool
	enriched  enrich.Click
	partition int32
	offset    int64
}

type span struct{ start, end uint32 }

// field is the string field f.
func (r *clickRecord) field(f events.ClickField) string {
	return r.strs[r.spans[f].start:r.spans[f].end]
}

// take is what ingest does with a field of a click.
type take uint8

const (
	skip take = iota // a field statistics do not store, or a key that is no field
	takeString
	takeTime
	takeBool
	// takeInput is a string field ingest reads without storing it: the landing URL, whose
	// UTM parameters enrichment stores.
	takeInput
)

// takes is what ingest does with each field of events.ClickFields, and, at keyOther, with
// keys that are no field.
var takes = func() (t [keyOther + 1]take) {
	for f, spec := range events.ClickFields {
		if spec.Column != "" {
			t[f] = [...]take{events.KindString: takeString, events.KindTime: takeTime, events.KindBool: takeBool}[spec.Kind]
		}
	}
	t[events.FieldLandingURL] = takeInput
	return t
}()

// newClickRecord is c as a record, for writes that do not come from Kafka (Writer.WriteClicks).
func newClickRecord(c Click) clickRecord {
	r := clickRecord{enriched: c.Enriched, partition: c.Partition, offset: c.Offset}
	var strs []byte
	for f := range events.NumClickFields {
		switch takes[f] {
		case takeString, takeInput:
			s := *c.Field(f).(*string)
			r.spans[f] = span{uint32(len(strs)), uint32(len(strs) + len(s))}
			strs = append(strs, s...)
		case takeTime:
			r.at = *c.Field(f).(*time.Time)
		case takeBool:
			r.bools[f] = *c.Field(f).(*bool)
		}
	}
	r.strs = string(strs)
	return r
}

// valid reports what makes a click unusable for statistics.
func (r *clickRecord) valid() error {
	if r.field(events.FieldClickID) == "" || r.field(events.FieldAdvertiserID) == "" || r.at.IsZero() {
		return fmt.Errorf("%w: click %q: click id, advertiser id and occurred_at are required", ErrInvalid, r.field(events.FieldClickID))
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
		switch takes[k] {
		case takeString, takeInput:
			s, serr := v.StringBytes()
			if serr != nil {
				err = fmt.Errorf("%s: %w", key, serr)
				return
			}
			r.spans[k] = span{uint32(len(cp.arena) - start), uint32(len(cp.arena) - start + len(s))}
			cp.arena = append(cp.arena, s...)
		case takeTime:
			s, serr := v.StringBytes()
			if serr == nil {
				serr = r.at.UnmarshalText(s)
			}
			if serr != nil {
				err = fmt.Errorf("%s: %w", key, serr)
			}
		case takeBool:
			r.bools[k], err = boolField(key, v)
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
	cp.last = start
	if n := len(cp.arena) - start; n > 0 {
		r.strs = unsafe.String(&cp.arena[start], n)
	}
}

// forget gives the arena back the input field f (takeInput) of r, the click parsed last, once
// enrichment has read it, when its string is the last of the click's: the landing URL is the
// last field the platform writes, a fifth of a click's strings or more, and every click of a
// batch in hand kept it until the batch was stored. Nothing refers to the bytes afterwards
// (enrichment keeps no view of its inputs); the next click's strings take their place.
func (cp *clickParser) forget(r *clickRecord, f events.ClickField) {
	sp := r.spans[f]
	if sp.start == sp.end || int(sp.end) != len(r.strs) || len(cp.arena)-cp.last != len(r.strs) {
		return
	}
	for g := range r.spans {
		if events.ClickField(g) != f && r.spans[g].end > sp.start { // an empty field after it
			return
		}
	}
	cp.arena = cp.arena[:len(cp.arena)-int(sp.end-sp.start)]
	r.strs, r.spans[f] = r.strs[:sp.start], span{}
}

func boolField(key []byte, v *fastjson.Value) (bool, error) {
	b, err := v.Bool()
	if err != nil {
		return false, fmt.Errorf("%s: %w", key, err)
	}
	return b, nil
}
