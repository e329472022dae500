package programs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/page"
)

// Promotion is an offer inside a program: its own landing page, a coupon code, dates.
type Promotion struct {
	ID        string `json:"id"`
	ProgramID string `json:"program_id"`
	Title     string `json:"title"`
	// LandingURL overrides the program's landing URL for links of this promotion.
	LandingURL *string    `json:"landing_url"`
	CouponCode *string    `json:"coupon_code"`
	StartsAt   *time.Time `json:"starts_at"`
	EndsAt     *time.Time `json:"ends_at"`
	// Active: the program is active and now is within [starts_at, ends_at).
	Active    bool      `json:"active"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// PromotionInput creates a promotion; only the title is required. Times are RFC 3339; an
// empty string is the same as null.
type PromotionInput struct {
	Title      string  `json:"title"`
	LandingURL *string `json:"landing_url"`
	CouponCode *string `json:"coupon_code"`
	StartsAt   *string `json:"starts_at"`
	EndsAt     *string `json:"ends_at"`
}

// PromotionPatch changes a promotion: absent fields stay, null clears an optional one.
type PromotionPatch struct {
	Title      Optional[string] `json:"title"`
	LandingURL Optional[string] `json:"landing_url"`
	CouponCode Optional[string] `json:"coupon_code"`
	StartsAt   Optional[string] `json:"starts_at"`
	EndsAt     Optional[string] `json:"ends_at"`
}

// PromotionFilter narrows a promotion list.
type PromotionFilter struct {
	ProgramID string // "" for every program the actor sees
	// Active keeps the promotions valid now (see Promotion.Active).
	Active bool
}

func validPromotion(in PromotionInput, v *validator) (Promotion, error) {
	p := Promotion{Title: strings.TrimSpace(in.Title), LandingURL: optional(in.LandingURL), CouponCode: optional(in.CouponCode)}
	v.text("title", p.Title, 1, 200, false)
	if p.LandingURL != nil {
		v.landingURL("landing_url", *p.LandingURL)
	}
	if p.CouponCode != nil {
		v.text("coupon_code", *p.CouponCode, 1, 64, false)
		v.check(!strings.ContainsAny(*p.CouponCode, " \t"), "coupon_code", "must not contain spaces")
	}
	p.StartsAt = v.timestamp("starts_at", in.StartsAt)
	p.EndsAt = v.timestamp("ends_at", in.EndsAt)
	if p.StartsAt != nil && p.EndsAt != nil && !p.EndsAt.After(*p.StartsAt) {
		v.add("ends_at", "must be after starts_at")
	}
	return p, v.err()
}

func (p Promotion) input() PromotionInput {
	in := PromotionInput{Title: p.Title, LandingURL: p.LandingURL, CouponCode: p.CouponCode}
	for _, t := range []struct {
		src *time.Time
		dst **string
	}{{p.StartsAt, &in.StartsAt}, {p.EndsAt, &in.EndsAt}} {
		if t.src != nil {
			s := t.src.Format(time.RFC3339Nano)
			*t.dst = &s
		}
	}
	return in
}

func (pp PromotionPatch) apply(in PromotionInput, v *validator) PromotionInput {
	patch(&in.Title, pp.Title, "title", v)
	patchNullable(&in.LandingURL, pp.LandingURL)
	patchNullable(&in.CouponCode, pp.CouponCode)
	patchNullable(&in.StartsAt, pp.StartsAt)
	patchNullable(&in.EndsAt, pp.EndsAt)
	return in
}

// activeSQL is Promotion.Active, with @now the service clock.
const activeSQL = `(p.status = 'active' AND (pr.starts_at IS NULL OR pr.starts_at <= @now) AND (pr.ends_at IS NULL OR pr.ends_at > @now))`

const promotionColumns = `pr.id, pr.program_id, pr.title, pr.landing_url, pr.coupon_code, pr.starts_at, pr.ends_at, ` +
	activeSQL + `, pr.created_at, pr.updated_at`

func scanPromotion(row pgx.CollectableRow) (Promotion, error) {
	var p Promotion
	err := row.Scan(&p.ID, &p.ProgramID, &p.Title, &p.LandingURL, &p.CouponCode, &p.StartsAt, &p.EndsAt, &p.Active, &p.CreatedAt, &p.UpdatedAt)
	for _, t := range []*time.Time{p.StartsAt, p.EndsAt, &p.CreatedAt, &p.UpdatedAt} {
		if t != nil {
			*t = t.UTC()
		}
	}
	return p, err
}

// ListPromotions lists promotions newest first: those of one program the actor may see by
// id (NotFoundError otherwise), or of every program in the actor's program list.
func (s *Service) ListPromotions(ctx context.Context, a Actor, f PromotionFilter, pr page.Request) ([]Promotion, string, error) {
	args := pgx.NamedArgs{"company": a.CompanyID, "now": s.now(), "active": f.Active, "before": pr.Before, "limit": pr.Limit + 1}
	where := scope(a, true)
	if f.ProgramID != "" {
		v := &validator{}
		v.id("program_id", ids.Program, f.ProgramID)
		if err := v.err(); err != nil {
			return nil, "", err
		}
		if _, err := s.Program(ctx, a, f.ProgramID); err != nil {
			return nil, "", err
		}
		where, args["program"] = `pr.program_id = @program`, f.ProgramID
	}
	rows, _ := s.db.Query(ctx, `SELECT `+promotionColumns+` FROM promotions pr JOIN programs p ON p.id = pr.program_id WHERE `+where+
		` AND (NOT @active OR `+activeSQL+`) AND (@before = '' OR pr.id < @before) ORDER BY pr.id DESC LIMIT @limit`, args)
	list, err := pgx.CollectRows(rows, scanPromotion)
	if err != nil {
		return nil, "", fmt.Errorf("list promotions: %w", err)
	}
	list, next := page.Cut(list, pr.Limit, func(p Promotion) string { return p.ID })
	return list, next, nil
}

// CreatePromotion adds a promotion to a program of the actor's company.
func (s *Service) CreatePromotion(ctx context.Context, a Actor, programID string, in PromotionInput) (Promotion, error) {
	if err := a.requireAdvertiserWriter(); err != nil {
		return Promotion{}, err
	}
	p, err := validPromotion(in, &validator{})
	if err != nil {
		return Promotion{}, err
	}
	now := s.now()
	p.ID, p.ProgramID, p.CreatedAt, p.UpdatedAt = ids.New(ids.Promotion), programID, now, now
	// The program must be the actor's; the row lock keeps it from being deleted meanwhile.
	rows, _ := s.db.Query(ctx, `WITH p AS (SELECT id, status FROM programs p WHERE p.id = @program AND `+scope(a, false)+` FOR SHARE),
		pr AS (INSERT INTO promotions (id, program_id, title, landing_url, coupon_code, starts_at, ends_at, created_at, updated_at)
			SELECT @id, p.id, @title, @landing_url, @coupon_code, @starts_at, @ends_at, @now, @now FROM p RETURNING *)
		SELECT `+promotionColumns+` FROM pr JOIN p ON true`,
		pgx.NamedArgs{"program": programID, "company": a.CompanyID, "id": p.ID, "title": p.Title, "landing_url": p.LandingURL,
			"coupon_code": p.CouponCode, "starts_at": p.StartsAt, "ends_at": p.EndsAt, "now": now})
	return collectPromotion(rows)
}

// UpdatePromotion applies a patch to a promotion of the actor's company and notifies
// LinkChangedChannel (links of the promotion use its landing URL).
func (s *Service) UpdatePromotion(ctx context.Context, a Actor, id string, pp PromotionPatch) (Promotion, error) {
	if err := a.requireAdvertiserWriter(); err != nil {
		return Promotion{}, err
	}
	var next Promotion
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		args := pgx.NamedArgs{"id": id, "company": a.CompanyID, "now": s.now()}
		cur, err := queryOne(ctx, tx, "promotion", `SELECT `+promotionColumns+` FROM promotions pr JOIN programs p ON p.id = pr.program_id
			WHERE pr.id = @id AND `+scope(a, false)+` FOR UPDATE OF pr`, args, scanPromotion)
		if err != nil {
			return err
		}
		v := &validator{}
		p, err := validPromotion(pp.apply(cur.input(), v), v)
		if err != nil {
			return err
		}
		args["title"], args["landing_url"], args["coupon_code"], args["starts_at"], args["ends_at"] =
			p.Title, p.LandingURL, p.CouponCode, p.StartsAt, p.EndsAt
		rows, _ := tx.Query(ctx, `WITH pr AS (UPDATE promotions SET title = @title, landing_url = @landing_url, coupon_code = @coupon_code,
			starts_at = @starts_at, ends_at = @ends_at, updated_at = @now WHERE id = @id RETURNING *)
			SELECT `+promotionColumns+` FROM pr JOIN programs p ON p.id = pr.program_id`, args)
		if next, err = collectPromotion(rows); err != nil {
			return err
		}
		return notifyLinksChanged(ctx, tx, next.ProgramID)
	})
	if err != nil {
		return Promotion{}, err
	}
	return next, nil
}

func collectPromotion(rows pgx.Rows) (Promotion, error) {
	p, err := pgx.CollectExactlyOneRow(rows, scanPromotion)
	if errors.Is(err, pgx.ErrNoRows) {
		return p, &NotFoundError{What: "program"}
	}
	if err != nil {
		return p, fmt.Errorf("write promotion: %w", err)
	}
	return p, nil
}
