package conversions

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

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
func emit(ctx context.Context, tx pgx.Tx, c Conversion, previous string) error {
	m := c.Commission
	d := events.ConversionData{
		ID: c.ID, Type: c.Type, Amount: money.Format(c.Amount, c.Currency), Status: m.Status, PreviousStatus: previous,
		Currency: c.Currency, CommissionID: m.ID, CommissionAmount: money.Format(m.Amount, m.Currency),
		ProgramID: c.ProgramID, AffiliateID: c.AffiliateID, AdvertiserID: c.AdvertiserID, LinkID: c.LinkID,
		ClickID: c.ClickID, Sub1: c.Sub1, ExternalID: c.ExternalID, OccurredAt: c.OccurredAt, Version: m.Version,
		Attribution: c.Attribution, CouponCode: c.CouponCode, CustomerID: c.CustomerID,
	}
	if e := c.Exchange; e != nil {
		d.OriginalAmount, d.OriginalCurrency = money.Format(e.OriginalAmount, e.OriginalCurrency), e.OriginalCurrency
		d.ExchangeRate, d.RateDate = e.Rate, e.RateDate.Format(time.DateOnly)
	}
	data, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("encode event data: %w", err)
	}
	types := []string{events.CommissionStatusChanged}
	if e, ok := statusEvents[m.Status]; ok {
		types = []string{e, events.CommissionStatusChanged}
	}
	for _, typ := range types {
		if _, err := outbox.Write(ctx, tx, c.ID, events.Envelope{Type: typ, OccurredAt: m.UpdatedAt,
			AdvertiserID: c.AdvertiserID, AffiliateID: c.AffiliateID, ProgramID: c.ProgramID, Data: data}); err != nil {
			return err
		}
	}
	return nil
}
