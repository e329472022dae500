package demo

import (
	"context"
	"fmt"

	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/links"
	"github.com/partnerstream/partnerstream/internal/page"
	"github.com/partnerstream/partnerstream/internal/programs"
)

// Programs is what the demo program needs from the programs service.
type Programs interface {
	ListPrograms(ctx context.Context, a programs.Actor, f programs.ProgramFilter, pr page.Request) ([]programs.Program, string, error)
	CreateProgram(ctx context.Context, a programs.Actor, in programs.ProgramInput) (programs.Program, error)
	ListPromotions(ctx context.Context, a programs.Actor, f programs.PromotionFilter, pr page.Request) ([]programs.Promotion, string, error)
	CreatePromotion(ctx context.Context, a programs.Actor, programID string, in programs.PromotionInput) (programs.Promotion, error)
	Apply(ctx context.Context, a programs.Actor, in programs.ApplyInput) (programs.Partnership, bool, error)
}

// Links is what the demo tracking link needs from the links service.
type Links interface {
	List(ctx context.Context, companyID, companyKind string, f links.Filter, p page.Request) ([]links.Link, string, error)
	Create(ctx context.Context, affiliateID, companyKind string, in links.NewLink) (links.Link, error)
}

// demoProgram names the seeded program; seeding finds it by this name.
const demoProgram = "Demo Store"

// SeedProgram makes sure the demo advertiser has a public program with a promotion, that
// the demo affiliate is its (approved) partner, and that the affiliate has a tracking link;
// it records the program and the link's URL in the file.
func SeedProgram(ctx context.Context, progs Programs, ls Links, f *File, path string) error {
	adv := programs.Actor{CompanyID: f.Advertiser.CompanyID, Kind: identity.Advertiser}
	aff := programs.Actor{CompanyID: f.Affiliate.CompanyID, Kind: identity.Affiliate}
	prg, err := ensureProgram(ctx, progs, adv)
	if err != nil {
		return fmt.Errorf("seed program: %w", err)
	}
	promos, _, err := progs.ListPromotions(ctx, adv, programs.PromotionFilter{ProgramID: prg.ID}, page.Request{Limit: 1})
	if err != nil {
		return fmt.Errorf("seed promotion: %w", err)
	}
	if len(promos) == 0 {
		code := "WELCOME10"
		if _, err := progs.CreatePromotion(ctx, adv, prg.ID, programs.PromotionInput{Title: "10% off your first order", CouponCode: &code}); err != nil {
			return fmt.Errorf("seed promotion: %w", err)
		}
	}
	// A public program approves the application at once; applying again returns it.
	if _, _, err := progs.Apply(ctx, aff, programs.ApplyInput{ProgramID: prg.ID, Message: "Demo partner"}); err != nil {
		return fmt.Errorf("seed partnership: %w", err)
	}
	existing, _, err := ls.List(ctx, aff.CompanyID, identity.Affiliate, links.Filter{ProgramID: prg.ID}, page.Request{Limit: 1})
	if err != nil {
		return fmt.Errorf("seed link: %w", err)
	}
	var link links.Link
	if len(existing) > 0 {
		link = existing[0]
	} else if link, err = ls.Create(ctx, aff.CompanyID, identity.Affiliate, links.NewLink{ProgramID: prg.ID, Subs: [5]string{"demo"}}); err != nil {
		return fmt.Errorf("seed link: %w", err)
	}
	f.ProgramID, f.TrackingURL = prg.ID, link.URL
	return write(path, *f)
}

func ensureProgram(ctx context.Context, progs Programs, adv programs.Actor) (programs.Program, error) {
	req := page.Request{Limit: page.MaxLimit}
	for {
		list, next, err := progs.ListPrograms(ctx, adv, programs.ProgramFilter{}, req)
		if err != nil {
			return programs.Program{}, err
		}
		for _, p := range list {
			if p.Name == demoProgram {
				return p, nil
			}
		}
		if next == "" {
			break
		}
		if req, err = page.Parse("", next); err != nil {
			return programs.Program{}, err
		}
	}
	window := 30
	return progs.CreateProgram(ctx, adv, programs.ProgramInput{
		Name: demoProgram, Description: "A demo shop paying 10% of every sale.", LandingURL: "https://shop.example.com/",
		Currency: "EUR", Commission: &programs.RuleInput{Type: programs.Percent, Percent: "10"},
		AttributionWindowDays: &window, Visibility: programs.Public,
		Website: "https://shop.example.com/", Categories: []string{"ecommerce"},
		Terms: "No bidding on the shop's brand name; no coupon sites.",
	})
}
