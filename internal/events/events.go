// Package events defines the messages on the platform's Kafka topics: click events on
// partnerstream.clicks and domain events on partnerstream.events. Producers (api, outbox
// relay) and consumers (ingest, deliver) share these types, so the wire format lives in one
// place.
package events

import (
	"encoding/json"
	"fmt"
	"time"
)

// Domain event types (docs/architecture.md, "Events and their envelope").
const (
	ConversionCreated       = "conversion.created"
	ConversionApproved      = "conversion.approved"
	ConversionRejected      = "conversion.rejected"
	PartnershipCreated      = "partnership.created"
	CommissionStatusChanged = "commission.status_changed"
	// CommissionHeld: a fraud rule put the commission on hold (its status does not change).
	CommissionHeld = "commission.held"
	// CommissionReleased: the advertiser released a held commission; it goes back to the
	// normal flow.
	CommissionReleased = "commission.released"
)

// Types lists every domain event type.
var Types = []string{ConversionCreated, ConversionApproved, ConversionRejected, PartnershipCreated, CommissionStatusChanged,
	CommissionHeld, CommissionReleased}

// PostbackTypes are the events postback URLs receive: every status change, and the hold and
// release that carry the reason codes.
var PostbackTypes = []string{CommissionStatusChanged, CommissionHeld, CommissionReleased}

// ClickArrived is no domain event: ingest publishes it on partnerstream.events, keyed by the
// conversion id, when the click of a conversion it wrote without the click reaches ClickHouse,
// so that the conversion's writer moves it to the click's sub1 (docs/stats.md, "A conversion's
// link and sub1"). It names no company, so nobody receives it, and it is not in Types, so
// nobody can subscribe to it.
const ClickArrived = "ingest.click_arrived"

// ClickArrivedData is the data of ClickArrived: the click's link, sub1 and origin, and since
// when the conversion awaited it.
type ClickArrivedData struct {
	ConversionID string      `json:"conversion_id"`
	ClickID      string      `json:"click_id"`
	LinkID       string      `json:"link_id"`
	Sub1         string      `json:"sub1"`
	Origin       ClickOrigin `json:"origin"`
	Since        time.Time   `json:"since"`
}

// ClickOrigin is where a click came from, as ingest derived it (ClickHouse migration 0009;
// docs/tracking.md, "Where clicks come from"), and what a conversion attributed to the click
// is counted under in the statistics. The zero value is a click from before enrichment, or
// none. Hosting is 0 or 1, as ClickHouse stores it.
type ClickOrigin struct {
	Country        string `json:"country,omitempty"`
	Region         string `json:"region,omitempty"`
	City           string `json:"city,omitempty"`
	ASN            uint32 `json:"asn,omitempty"`
	ASOrg          string `json:"as_org,omitempty"`
	Hosting        uint8  `json:"hosting,omitempty"`
	DeviceType     string `json:"device_type,omitempty"`
	Browser        string `json:"browser,omitempty"`
	OS             string `json:"os,omitempty"`
	ReferrerDomain string `json:"referrer_domain,omitempty"`
	UTMSource      string `json:"utm_source,omitempty"`
	UTMMedium      string `json:"utm_medium,omitempty"`
	UTMCampaign    string `json:"utm_campaign,omitempty"`
}

// ClickOriginColumns are the ClickHouse columns of a ClickOrigin, in the order of Fields, the
// same in clicks, click_index, conversion_changes and conversions.
const ClickOriginColumns = "country, region, city, asn, as_org, hosting, device_type, browser, os, referrer_domain, utm_source, utm_medium, utm_campaign"

// Fields are pointers to o's fields in the order of ClickOriginColumns, to scan into.
func (o *ClickOrigin) Fields() []any {
	return []any{&o.Country, &o.Region, &o.City, &o.ASN, &o.ASOrg, &o.Hosting, &o.DeviceType, &o.Browser, &o.OS,
		&o.ReferrerDomain, &o.UTMSource, &o.UTMMedium, &o.UTMCampaign}
}

// Values are o's fields in the order of ClickOriginColumns, to insert.
func (o ClickOrigin) Values() []any {
	return []any{o.Country, o.Region, o.City, o.ASN, o.ASOrg, o.Hosting, o.DeviceType, o.Browser, o.OS,
		o.ReferrerDomain, o.UTMSource, o.UTMMedium, o.UTMCampaign}
}

// Commission statuses: the status of a conversion's commission, as the conversions domain
// moves it and as its events, webhooks, statistics and exports carry it (docs/architecture.md,
// "Domain states"). They are declared here, in the contract every side shares, and nowhere
// else.
const (
	CommissionPending  = "pending"
	CommissionApproved = "approved"
	CommissionRejected = "rejected"
	CommissionPaid     = "paid"
	CommissionReversed = "reversed"
)

// CommissionStatuses lists the commission statuses in the order of their lifecycle.
var CommissionStatuses = []string{CommissionPending, CommissionApproved, CommissionRejected, CommissionPaid, CommissionReversed}

// Envelope is a domain event on partnerstream.events, keyed by the aggregate id. It is written
// to the outbox in the transaction of the change and published by the relay; consumers dedupe
// by ID (a relay crash may publish an event twice, never lose one).
type Envelope struct {
	ID           string          `json:"id"` // evt_...
	Type         string          `json:"type"`
	OccurredAt   time.Time       `json:"occurred_at"`
	AdvertiserID string          `json:"advertiser_id"`
	AffiliateID  string          `json:"affiliate_id"`
	ProgramID    string          `json:"program_id"`
	Data         json.RawMessage `json:"data"`
}

// ConversionData is the `data` object of the conversion.* and commission.status_changed
// events, exactly as webhook receivers see it (docs/architecture.md, "The webhook payload").
// Amounts are decimal strings in Currency.
type ConversionData struct {
	ID               string `json:"id"`     // cnv_...
	Type             string `json:"type"`   // sale, lead, signup, install, custom
	Amount           string `json:"amount"` // the sale amount
	Status           string `json:"status"` // the commission status after the change
	PreviousStatus   string `json:"previous_status,omitempty"`
	Currency         string `json:"currency"`
	CommissionID     string `json:"commission_id"`
	CommissionAmount string `json:"commission_amount"`
	ProgramID        string `json:"program_id"`
	AffiliateID      string `json:"affiliate_id"`
	AdvertiserID     string `json:"advertiser_id"`
	LinkID           string `json:"link_id,omitempty"`
	ClickID          string `json:"click_id,omitempty"`
	// Sub1 is the affiliate's sub-id of the click that won, when the conversion knew it.
	Sub1       string    `json:"sub1,omitempty"`
	ExternalID string    `json:"external_id"`
	OccurredAt time.Time `json:"occurred_at"` // when the conversion happened
	// Attribution is click, coupon or customer: what put the conversion on the affiliate,
	// ClickID, CouponCode or CustomerID naming it. Events written before it existed have
	// none: read that as click.
	Attribution string `json:"attribution,omitempty"`
	CouponCode  string `json:"coupon_code,omitempty"`
	CustomerID  string `json:"customer_id,omitempty"`
	// Version increases with every change of the conversion, so consumers keep the latest.
	Version int64 `json:"version"`
	// The exchange snapshot of a conversion reported in another currency than the program's
	// (absent otherwise): the amount and currency reported, the rate (one original unit is
	// worth exchange_rate units of currency) and its day. Amount is the converted sale.
	OriginalAmount   string `json:"original_amount,omitempty"`
	OriginalCurrency string `json:"original_currency,omitempty"`
	ExchangeRate     string `json:"exchange_rate,omitempty"`
	RateDate         string `json:"rate_date,omitempty"` // YYYY-MM-DD
	// Risk is the conversion's fraud verdict: absent when no rule fired (docs/fraud.md).
	Risk *Risk `json:"risk,omitempty"`
	// Country (ISO 3166-1 alpha-2) and DeviceType (desktop, mobile, tablet, bot, other) of
	// the click that won, as ingest enriched it; absent until the click is known.
	Country    string `json:"country,omitempty"`
	DeviceType string `json:"device_type,omitempty"`
}

// Risk is a conversion's fraud verdict as receivers see it: whether its commission is on hold
// and each rule that fired (shadow rules never show).
type Risk struct {
	Held    bool     `json:"held"`
	Reasons []Reason `json:"reasons"`
}

// Reason is one rule that fired: its reason code, its action (flag or hold) and the value
// it observed.
type Reason struct {
	Code   string `json:"code"`
	Action string `json:"action"`
	Value  string `json:"value"`
}

// ReasonCodes lists the codes of r, in order; none for nil.
func (r *Risk) ReasonCodes() []string {
	if r == nil {
		return nil
	}
	out := make([]string, len(r.Reasons))
	for i, x := range r.Reasons {
		out[i] = x.Code
	}
	return out
}

// PartnershipData is the `data` object of partnership.created, as webhook receivers see it:
// amount is always zero (a partnership has no sale) and status the partnership's.
type PartnershipData struct {
	ID   string `json:"id"`   // ptn_...
	Type string `json:"type"` // always "partnership"
	// Amount is zero in the program currency, so every event's data.amount reads alike.
	Amount       string    `json:"amount"`
	Status       string    `json:"status"`
	Currency     string    `json:"currency"`
	ProgramID    string    `json:"program_id"`
	AffiliateID  string    `json:"affiliate_id"`
	AdvertiserID string    `json:"advertiser_id"`
	CreatedAt    time.Time `json:"created_at"`
}

// webhookBody is the body of a webhook or postback delivery (docs/architecture.md, "The webhook
// payload").
type webhookBody struct {
	Event     string          `json:"event"`
	Data      json.RawMessage `json:"data"`
	Timestamp time.Time       `json:"timestamp"`
}

// WebhookBody returns the exact bytes a delivery of e sends and signs. The timestamp is when
// the event happened, so every delivery of one event carries the same body.
func WebhookBody(e Envelope) ([]byte, error) {
	data := e.Data
	if len(data) == 0 {
		data = json.RawMessage("{}")
	}
	b, err := json.Marshal(webhookBody{Event: e.Type, Data: data, Timestamp: e.OccurredAt.UTC()})
	if err != nil {
		return nil, fmt.Errorf("webhook body of event %s: %w", e.ID, err)
	}
	return b, nil
}
