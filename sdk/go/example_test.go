package partnerstream_test

import (
	"context"
	"fmt"
	"log"
	"os"

	partnerstream "github.com/partnerstream/partnerstream/sdk/go"
)

// The example of README.md: an advertiser's server registers an order with the click id its
// landing page received, reads the program's figures and walks its conversions. It compiles
// with the package's tests; test/journey runs a whole journey against the platform.
func Example() {
	ctx := context.Background()
	api, err := partnerstream.New("https://partners.example.com", os.Getenv("PARTNERSTREAM_API_KEY"))
	if err != nil {
		log.Fatal(err)
	}

	// Keep the key with the order: a retry with the same key never makes a second conversion.
	order := &partnerstream.V1RegisterConversionParams{IdempotencyKey: partnerstream.NewIdempotencyKey()}
	res, err := api.V1RegisterConversionWithResponse(ctx, order, partnerstream.ConversionInput{
		ClickId:    new("clk_..."), // the ps_click_id the landing page received
		ExternalId: "order-1042",
		Amount:     partnerstream.Amount("42.00"),
		Type:       new(partnerstream.ConversionInputTypeSale),
	})
	if err := partnerstream.Check(res, err); err != nil {
		log.Fatal(err) // e.g. partnerstream: 400 validation_failed; amount: "abc": not a decimal amount (request ...)
	}
	fmt.Println("conversion", res.JSON201.Id, "commission", res.JSON201.Commission.Amount)

	stats, err := api.V1GetStatsWithResponse(ctx, &partnerstream.V1GetStatsParams{ProgramId: &res.JSON201.ProgramId})
	if err := partnerstream.Check(stats, err); err != nil {
		log.Fatal(err)
	}
	fmt.Println(stats.JSON200.Totals.Clicks, "clicks,", stats.JSON200.Totals.Conversions.Total, "conversions")

	// Every page of a list.
	for c, err := range partnerstream.All(ctx, func(ctx context.Context, cursor *partnerstream.Cursor) ([]partnerstream.Conversion, string, error) {
		page, err := api.V1ListConversionsWithResponse(ctx, &partnerstream.V1ListConversionsParams{Cursor: cursor})
		if err := partnerstream.Check(page, err); err != nil {
			return nil, "", err
		}
		return page.JSON200.Data, page.JSON200.NextCursor, nil
	}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(c.Id, c.Commission.Status)
	}
}
