package events

import "time"

// Click is one tracked click on partnerstream.clicks, keyed by Visitor. The redirect makes it;
// ingest writes it to ClickHouse. Its fields are those of ClickFields, in the same order: the
// redirect's encoder and ingest's decoder and columns work from that table, not from the
// struct (docs/tracking.md, "Adding a field to clicks").
type Click struct {
	ClickID string `json:"click_id"`
	// Visitor is a keyed hash that stands for the visitor (docs/tracking.md, "Unique clicks"),
	// and the click's message key: one ingest replica sees every click of a visitor. Clicks of
	// redirects from before it have none.
	Visitor      string    `json:"visitor,omitempty"`
	OccurredAt   time.Time `json:"occurred_at"`
	LinkID       string    `json:"link_id"`
	ProgramID    string    `json:"program_id"`
	AffiliateID  string    `json:"affiliate_id"`
	AdvertiserID string    `json:"advertiser_id"`
	PromotionID  string    `json:"promotion_id,omitempty"`
	Sub1         string    `json:"sub1,omitempty"`
	Sub2         string    `json:"sub2,omitempty"`
	Sub3         string    `json:"sub3,omitempty"`
	Sub4         string    `json:"sub4,omitempty"`
	Sub5         string    `json:"sub5,omitempty"`
	IP           string    `json:"ip"`
	UserAgent    string    `json:"user_agent"`
	Referrer     string    `json:"referrer,omitempty"`
	Country      string    `json:"country,omitempty"`
	IsBot        bool      `json:"is_bot"`
	// IsDuplicate says the visitor clicked the link before in the same UTC hour. Ingest
	// decides it for a click with a Visitor (the redirect sends false); a click without one
	// keeps the flag its redirect set.
	IsDuplicate bool   `json:"is_duplicate"`
	LandingURL  string `json:"landing_url"`
}

// ClickField is a field of Click: its index in ClickFields, and in the arrays the hot paths
// keep per field.
type ClickField uint8

// The fields of Click, in its order.
const (
	FieldClickID ClickField = iota
	FieldVisitor
	FieldOccurredAt
	FieldLinkID
	FieldProgramID
	FieldAffiliateID
	FieldAdvertiserID
	FieldPromotionID
	FieldSub1
	FieldSub2
	FieldSub3
	FieldSub4
	FieldSub5
	FieldIP
	FieldUserAgent
	FieldReferrer
	FieldCountry
	FieldIsBot
	FieldIsDuplicate
	FieldLandingURL
	NumClickFields // how many fields a click has
)

// FieldKind is the Go type of a click field, which decides its JSON and its ClickHouse column.
type FieldKind uint8

const (
	KindString FieldKind = iota // string; a ClickHouse String
	KindTime                    // time.Time, RFC 3339 in JSON; a ClickHouse DateTime
	KindBool                    // bool; a ClickHouse UInt8
)

// ClickFieldSpec describes a click field on the wire and in ClickHouse.
type ClickFieldSpec struct {
	JSON string // its key in the JSON of partnerstream.clicks
	// Column is its column in ClickHouse's clicks table, empty for a field ingest does not
	// store (ingest then skips it whatever its value).
	Column    string
	Kind      FieldKind
	OmitEmpty bool // left out of the JSON when empty, as the struct tag's omitempty
}

// ClickFields is the wire format of a click: the one table a new field is added to (with its
// struct field and its ClickField). TestClickFieldsDescribeClick holds Click to it; the tests
// of the encoder (internal/tracking), the decoder and the columns (internal/ingest) walk it.
var ClickFields = [NumClickFields]ClickFieldSpec{
	FieldClickID:      {JSON: "click_id", Column: "click_id"},
	FieldVisitor:      {JSON: "visitor", Column: "visitor", OmitEmpty: true},
	FieldOccurredAt:   {JSON: "occurred_at", Column: "occurred_at", Kind: KindTime},
	FieldLinkID:       {JSON: "link_id", Column: "link_id"},
	FieldProgramID:    {JSON: "program_id", Column: "program_id"},
	FieldAffiliateID:  {JSON: "affiliate_id", Column: "affiliate_id"},
	FieldAdvertiserID: {JSON: "advertiser_id", Column: "advertiser_id"},
	FieldPromotionID:  {JSON: "promotion_id", Column: "promotion_id", OmitEmpty: true},
	FieldSub1:         {JSON: "sub1", Column: "sub1", OmitEmpty: true},
	FieldSub2:         {JSON: "sub2", Column: "sub2", OmitEmpty: true},
	FieldSub3:         {JSON: "sub3", Column: "sub3", OmitEmpty: true},
	FieldSub4:         {JSON: "sub4", Column: "sub4", OmitEmpty: true},
	FieldSub5:         {JSON: "sub5", Column: "sub5", OmitEmpty: true},
	FieldIP:           {JSON: "ip", Column: "ip"},
	FieldUserAgent:    {JSON: "user_agent", Column: "user_agent"},
	FieldReferrer:     {JSON: "referrer", Column: "referrer", OmitEmpty: true},
	FieldCountry:      {JSON: "country", Column: "country", OmitEmpty: true},
	FieldIsBot:        {JSON: "is_bot", Column: "is_bot", Kind: KindBool},
	FieldIsDuplicate:  {JSON: "is_duplicate", Column: "is_duplicate", Kind: KindBool},
	FieldLandingURL:   {JSON: "landing_url"}, // statistics do not use it
}

// Field points to the field f of c: a *string, *time.Time or *bool as its Kind says. It is for
// code that goes over every field and is not on a hot path (a boxed pointer and a switch per
// field); the hot paths name the struct fields themselves.
func (c *Click) Field(f ClickField) any {
	switch f {
	case FieldClickID:
		return &c.ClickID
	case FieldVisitor:
		return &c.Visitor
	case FieldOccurredAt:
		return &c.OccurredAt
	case FieldLinkID:
		return &c.LinkID
	case FieldProgramID:
		return &c.ProgramID
	case FieldAffiliateID:
		return &c.AffiliateID
	case FieldAdvertiserID:
		return &c.AdvertiserID
	case FieldPromotionID:
		return &c.PromotionID
	case FieldSub1:
		return &c.Sub1
	case FieldSub2:
		return &c.Sub2
	case FieldSub3:
		return &c.Sub3
	case FieldSub4:
		return &c.Sub4
	case FieldSub5:
		return &c.Sub5
	case FieldIP:
		return &c.IP
	case FieldUserAgent:
		return &c.UserAgent
	case FieldReferrer:
		return &c.Referrer
	case FieldCountry:
		return &c.Country
	case FieldIsBot:
		return &c.IsBot
	case FieldIsDuplicate:
		return &c.IsDuplicate
	case FieldLandingURL:
		return &c.LandingURL
	}
	return nil
}

// MarkedClick is a click with the given fields (every field when none is given) set to values
// that tell them apart: a string field holds its JSON name, the time field a time with
// nanoseconds, a bool field true. Tests of the encoders use it to see that each field goes
// where it belongs; a field set alone shows a bool that lands on another.
func MarkedClick(fields ...ClickField) Click {
	if len(fields) == 0 {
		for f := range NumClickFields {
			fields = append(fields, f)
		}
	}
	var c Click
	for _, f := range fields {
		switch p := c.Field(f).(type) {
		case *string:
			*p = ClickFields[f].JSON
		case *time.Time:
			*p = time.Date(2026, 11, 22, 10, 4, 5, 123456789, time.UTC)
		case *bool:
			*p = true
		}
	}
	return c
}
