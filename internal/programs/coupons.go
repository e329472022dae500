package programs

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/page"
)

// CouponCode is a code an advertiser gave a partnership: an order that uses it is the
// partnership's, though the buyer never clicked (docs/conversions.md).
type CouponCode struct {
	ID            string    `json:"id"`
	Code          string    `json:"code"`
	PartnershipID string    `json:"partnership_id"`
	ProgramID     string    `json:"program_id"`
	AffiliateID   string    `json:"affiliate_id"`
	AdvertiserID  string    `json:"advertiser_id"`
	CreatedAt     time.Time `json:"created_at"`
}

// CouponCodeInput creates a coupon code.
type CouponCodeInput struct {
	Code string `json:"code"`
}

// CouponCodePattern is what a code may be: what buyers type at a checkout, without spaces.
var CouponCodePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// ConflictError is a value already taken (a coupon code of the advertiser, in any case).
type ConflictError struct{ Field, Reason string }

func (e *ConflictError) Error() string { return e.Reason }

const couponColumns = `k.id, k.code, k.partnership_id, k.program_id, k.affiliate_id, k.advertiser_id, k.created_at`

func scanCoupon(row pgx.CollectableRow) (CouponCode, error) {
	var k CouponCode
	err := row.Scan(&k.ID, &k.Code, &k.PartnershipID, &k.ProgramID, &k.AffiliateID, &k.AdvertiserID, &k.CreatedAt)
	k.CreatedAt = k.CreatedAt.UTC()
	return k, err
}

// CreateCouponCode gives a partnership of the actor's programs a code, unique among the
// advertiser's codes whatever its case.
func (s *Service) CreateCouponCode(ctx context.Context, a Actor, partnershipID string, in CouponCodeInput) (CouponCode, error) {
	if err := a.requireAdvertiserWriter(); err != nil {
		return CouponCode{}, err
	}
	v := &validator{}
	v.check(CouponCodePattern.MatchString(in.Code), "code", "must be 1 to 64 letters, digits, '_' or '-'")
	if err := v.err(); err != nil {
		return CouponCode{}, err
	}
	p, err := queryOne(ctx, s.db, "partnership", `SELECT `+partnershipColumns+partnershipFrom+`s.id = @id AND `+partnershipScope(a),
		pgx.NamedArgs{"id": partnershipID, "company": a.CompanyID}, scanPartnership)
	if err != nil {
		return CouponCode{}, err
	}
	k := CouponCode{ID: ids.New(ids.CouponCode), Code: in.Code, PartnershipID: p.ID, ProgramID: p.ProgramID,
		AffiliateID: p.AffiliateID, AdvertiserID: p.AdvertiserID, CreatedAt: s.now()}
	_, err = s.db.Exec(ctx, `INSERT INTO coupon_codes (id, advertiser_id, program_id, partnership_id, affiliate_id, code, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, k.ID, k.AdvertiserID, k.ProgramID, k.PartnershipID, k.AffiliateID, k.Code, k.CreatedAt)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == pgerrcode.UniqueViolation {
		return CouponCode{}, &ConflictError{Field: "code", Reason: fmt.Sprintf("the code %q is already given to a partnership of yours (codes are unique whatever their case)", in.Code)}
	}
	if err != nil {
		return CouponCode{}, fmt.Errorf("create coupon code: %w", err)
	}
	return k, nil
}

// ListCouponCodes lists the codes of a partnership the actor sees (the advertiser's or the
// affiliate's own), newest first.
func (s *Service) ListCouponCodes(ctx context.Context, a Actor, partnershipID string, pr page.Request) ([]CouponCode, string, error) {
	if _, err := queryOne(ctx, s.db, "partnership", `SELECT `+partnershipColumns+partnershipFrom+`s.id = @id AND `+partnershipScope(a),
		pgx.NamedArgs{"id": partnershipID, "company": a.CompanyID}, scanPartnership); err != nil {
		return nil, "", err
	}
	rows, _ := s.db.Query(ctx, `SELECT `+couponColumns+` FROM coupon_codes k WHERE k.partnership_id = @id
		AND (@before = '' OR k.id < @before) ORDER BY k.id DESC LIMIT @limit`,
		pgx.NamedArgs{"id": partnershipID, "before": pr.Before, "limit": pr.Limit + 1})
	list, err := pgx.CollectRows(rows, scanCoupon)
	if err != nil {
		return nil, "", fmt.Errorf("list coupon codes: %w", err)
	}
	list, next := page.Cut(list, pr.Limit, func(k CouponCode) string { return k.ID })
	return list, next, nil
}
