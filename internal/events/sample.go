package events

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/money"
)

// sampleStatuses are the event types with a sample, and the commission status (and the
// previous one) their data carries.
var sampleStatuses = map[string][2]string{
	ConversionCreated:       {CommissionPending, ""},
	ConversionApproved:      {CommissionApproved, ""},
	ConversionRejected:      {CommissionRejected, ""},
	CommissionStatusChanged: {CommissionApproved, CommissionPending},
	PartnershipCreated:      {"pending", ""}, // a partnership's status
	CommissionHeld:          {CommissionPending, ""},
	CommissionReleased:      {CommissionPending, ""},
}

// SampleTypes lists, sorted, the event types Sample makes.
var SampleTypes = func() []string {
	types := make([]string, 0, len(sampleStatuses))
	for t := range sampleStatuses {
		types = append(types, t)
	}
	slices.Sort(types)
	return types
}()

// Sample returns a realistic event of the type for a company (the API's webhook test
// endpoint sends it), with fresh ids that name nothing stored: the company is the affiliate
// of the conversion when affiliate is true, else its advertiser. ok is false for a type
// without a sample.
func Sample(eventType, companyID string, affiliate bool, now time.Time) (e Envelope, ok bool) {
	status, ok := sampleStatuses[eventType]
	if !ok {
		return Envelope{}, false
	}
	const currency = "USD"
	adv, aff := ids.New(ids.Company), ids.New(ids.Company)
	if affiliate {
		aff = companyID
	} else {
		adv = companyID
	}
	version := int64(1)
	if status[0] != CommissionPending {
		version = 2
	}
	program := ids.New(ids.Program)
	var data any = ConversionData{
		ID: ids.New(ids.Conversion), Type: "sale", Amount: money.Format(4250, currency), Status: status[0], PreviousStatus: status[1],
		Currency: currency, CommissionID: ids.New(ids.Commission), CommissionAmount: money.Format(425, currency),
		ProgramID: program, AffiliateID: aff, AdvertiserID: adv, LinkID: ids.New(ids.Link), ClickID: ids.New(ids.Click),
		ExternalID: "order-1001", OccurredAt: now.Add(-time.Minute).UTC().Truncate(time.Second), Version: version, Attribution: "click",
	}
	if eventType == CommissionHeld || eventType == CommissionReleased {
		d := data.(ConversionData)
		d.Risk = &Risk{Held: eventType == CommissionHeld, Reasons: []Reason{{Code: "conversion_too_fast", Action: "hold", Value: "2s"}}}
		data = d
	}
	if eventType == PartnershipCreated {
		data = PartnershipData{ID: ids.New(ids.Partnership), Type: "partnership", Amount: money.Format(0, currency),
			Status: status[0], Currency: currency, ProgramID: program, AffiliateID: aff, AdvertiserID: adv, CreatedAt: now.UTC().Truncate(time.Second)}
	}
	raw, _ := json.Marshal(data) // plain strings and times always encode
	return Envelope{ID: ids.New(ids.Event), Type: eventType, OccurredAt: now.UTC().Truncate(time.Second), AdvertiserID: adv, AffiliateID: aff,
		ProgramID: program, Data: raw}, true
}
