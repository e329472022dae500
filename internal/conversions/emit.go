package conversions

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/money"
	"github.com/partnerstream/partnerstream/internal/outbox"
)

// statusEvents are the conversion.* events of a commission status, beside the
// commission.status_changed every change emits.
var statusEvents = map[string]string{
	Pending:  events.ConversionCreated,
	Approved: events.ConversionApproved,
	Rejected: events.ConversionRejected,
}

// emit writes the events of c's commission reaching its current status from previous (""
// for a new conversion) into the outbox, in the caller's transaction, keyed by the
// conversion id so that one conversion's events stay in order.
func emit(ctx context.Context, tx outbox.Execer, c Conversion, previous string) error {
	types := []string{events.CommissionStatusChanged}
	if e, ok := statusEvents[c.Commission.Status]; ok {
		types = []string{e, events.CommissionStatusChanged}
	}
	return emitTypes(ctx, tx, c, previous, types...)
}

// emitTypes writes events of the given types for c, each with c's data.
func emitTypes(ctx context.Context, tx outbox.Execer, c Conversion, previous string, types ...string) error {
	m := c.Commission
	d := events.ConversionData{
		ID: c.ID, Type: c.Type, Amount: money.Format(c.Amount, c.Currency), Status: m.Status, PreviousStatus: previous,
		Currency: c.Currency, CommissionID: m.ID, CommissionAmount: money.Format(m.Amount, m.Currency),
		ProgramID: c.ProgramID, AffiliateID: c.AffiliateID, AdvertiserID: c.AdvertiserID, LinkID: c.LinkID,
		ClickID: c.ClickID, Sub1: c.Sub1, ExternalID: c.ExternalID, OccurredAt: c.OccurredAt, Version: m.Version,
		Attribution: c.Attribution, CouponCode: c.CouponCode, CustomerID: c.CustomerID,
		Country: c.Country, DeviceType: c.DeviceType,
	}
	if e := c.Exchange; e != nil {
		d.OriginalAmount, d.OriginalCurrency = money.Format(e.OriginalAmount, e.OriginalCurrency), e.OriginalCurrency
		d.ExchangeRate, d.RateDate = e.Rate, e.RateDate.Format(time.DateOnly)
	}
	d.Risk = risk(m)
	data, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("encode event data: %w", err)
	}
	for _, typ := range types {
		if _, err := outbox.Write(ctx, tx, c.ID, events.Envelope{Type: typ, OccurredAt: m.UpdatedAt,
			AdvertiserID: c.AdvertiserID, AffiliateID: c.AffiliateID, ProgramID: c.ProgramID, Data: data}); err != nil {
			return err
		}
	}
	return nil
}

// risk is the verdict receivers see: the acting findings and the hold; nil when nothing acts.
func risk(m Commission) *events.Risk {
	acting := m.Verdict().Acting()
	if len(acting) == 0 && m.HeldAt == nil {
		return nil
	}
	r := &events.Risk{Held: m.HeldAt != nil, Reasons: make([]events.Reason, len(acting))}
	for i, f := range acting {
		r.Reasons[i] = events.Reason{Code: f.Code, Action: f.Action, Value: f.Observed}
	}
	return r
}
