package ingest

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/money"
	"github.com/partnerstream/partnerstream/internal/timebound"
)

// Conversion is one state of a conversion, as a conversion.* or commission.status_changed
// event carries it, with the amounts in minor units of Currency.
type Conversion struct {
	EventID string
	ID      string
	Version uint64
	// Revision orders the states of one version: moving a conversion to its click's sub1
	// keeps the version and takes the next revision.
	Revision     uint32
	Status       string
	Type         string
	Currency     string
	Amount       int64 // the sale amount
	Commission   int64
	OccurredAt   time.Time
	AdvertiserID string
	ProgramID    string
	AffiliateID  string
	LinkID       string
	ClickID      string
	// Sub1 is taken from the event when it carries one, otherwise from the click.
	Sub1         string
	CommissionID string
	ExternalID   string
	Partition    int32
	Offset       int64

	// Attribution is click, coupon or customer; events from before it existed are click.
	Attribution string
	// Origin is where its click came from, taken from the click like its sub1 (never from the
	// event): what the statistics by country, device and so on count the conversion under.
	Origin events.ClickOrigin

	// ClickArrived marks no state but the news that the click of a conversion written without
	// it is in ClickHouse now (events.ClickArrived): ClickID, LinkID and Sub1 are the click's,
	// and AwaitingSince is when the conversion began to await it.
	ClickArrived  bool
	AwaitingSince time.Time
}

// ErrInvalid marks an event ingest cannot store (missing ids, malformed amounts). Such an
// event is logged, counted and skipped: retrying it would block its partition forever.
var ErrInvalid = errors.New("invalid event")

// conversionTypes are the domain events that carry a conversion's state.
var conversionTypes = map[string]bool{
	events.ConversionCreated:       true,
	events.ConversionApproved:      true,
	events.ConversionRejected:      true,
	events.CommissionStatusChanged: true,
}

// ParseConversion reads the conversion state out of a domain event, or the arrival of a
// conversion's click. ok is false for event types that carry no conversion
// (partnership.created), which statistics ignore.
func ParseConversion(e events.Envelope) (c Conversion, ok bool, err error) {
	if e.Type == events.ClickArrived {
		return parseClickArrived(e)
	}
	if !conversionTypes[e.Type] {
		return Conversion{}, false, nil
	}
	// sub1 is not part of the event contract yet; reading it when present lets a producer
	// that adds it spare ingest the click lookup.
	var d struct {
		events.ConversionData
		Sub1 string `json:"sub1"`
	}
	if err := json.Unmarshal(e.Data, &d); err != nil {
		return Conversion{}, true, fmt.Errorf("%w: %s %s: data: %w", ErrInvalid, e.Type, e.ID, err)
	}
	c = Conversion{
		EventID: e.ID, ID: d.ID, Status: d.Status, Type: d.Type, Currency: d.Currency,
		OccurredAt: d.OccurredAt.UTC(), AdvertiserID: first(d.AdvertiserID, e.AdvertiserID),
		ProgramID: first(d.ProgramID, e.ProgramID), AffiliateID: first(d.AffiliateID, e.AffiliateID),
		LinkID: d.LinkID, ClickID: d.ClickID, Sub1: d.Sub1, CommissionID: d.CommissionID, ExternalID: d.ExternalID,
		Attribution: first(d.Attribution, "click"),
	}
	if c.OccurredAt.IsZero() {
		c.OccurredAt = e.OccurredAt.UTC()
	}
	if !timebound.Contains(c.OccurredAt) {
		// Stored before the API refused such times: ClickHouse's DateTime would wrap it onto
		// a day some report reaches. 1970-01-01 is a day no report's range reaches.
		c.OccurredAt = time.Unix(0, 0).UTC()
	}
	switch {
	case c.ID == "" || c.AdvertiserID == "" || c.Status == "":
		return Conversion{}, true, fmt.Errorf("%w: %s %s: conversion id, advertiser id and status are required", ErrInvalid, e.Type, e.ID)
	case d.Version < 0:
		return Conversion{}, true, fmt.Errorf("%w: %s %s: negative version %d", ErrInvalid, e.Type, e.ID, d.Version)
	}
	c.Version = uint64(d.Version)
	if c.Amount, err = parseAmount(d.Amount, d.Currency); err != nil {
		return Conversion{}, true, fmt.Errorf("%w: %s %s: amount: %w", ErrInvalid, e.Type, e.ID, err)
	}
	if c.Commission, err = parseAmount(d.CommissionAmount, d.Currency); err != nil {
		return Conversion{}, true, fmt.Errorf("%w: %s %s: commission amount: %w", ErrInvalid, e.Type, e.ID, err)
	}
	return c, true, nil
}

func parseClickArrived(e events.Envelope) (Conversion, bool, error) {
	var d events.ClickArrivedData
	if err := json.Unmarshal(e.Data, &d); err != nil {
		return Conversion{}, true, fmt.Errorf("%w: %s %s: data: %w", ErrInvalid, e.Type, e.ID, err)
	}
	if d.ConversionID == "" || d.ClickID == "" {
		return Conversion{}, true, fmt.Errorf("%w: %s %s: conversion id and click id are required", ErrInvalid, e.Type, e.ID)
	}
	return Conversion{EventID: e.ID, ID: d.ConversionID, ClickID: d.ClickID, LinkID: d.LinkID, Sub1: d.Sub1,
		Origin: d.Origin, ClickArrived: true, AwaitingSince: d.Since.UTC()}, true, nil
}

// newerThan orders the states of a conversion by version, then revision.
func (c Conversion) newerThan(s Conversion) bool {
	return c.Version > s.Version || c.Version == s.Version && c.Revision > s.Revision
}

// parseAmount reads a decimal string; empty means zero (a lead has no sale amount).
func parseAmount(s, currency string) (int64, error) {
	if s == "" {
		if !money.ValidCurrency(currency) {
			return 0, fmt.Errorf("%q: %w", currency, money.ErrCurrency)
		}
		return 0, nil
	}
	return money.Parse(s, currency)
}

func first(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
