package programs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/money"
	"github.com/partnerstream/partnerstream/internal/outbox"
	"github.com/partnerstream/partnerstream/internal/page"
)

// Partnership is an affiliate's membership of a program: pending -> approved | rejected;
// approved -> suspended. Only approved partnerships track clicks and earn commissions.
type Partnership struct {
	ID           string `json:"id"`
	ProgramID    string `json:"program_id"`
	AffiliateID  string `json:"affiliate_id"`
	AdvertiserID string `json:"advertiser_id"`
	// The names of both companies: each side of a partnership may see the other's name.
	AffiliateName  string `json:"affiliate_name"`
	AdvertiserName string `json:"advertiser_name"`
	Status         string `json:"status"`
	// Message is the affiliate's note to the advertiser when applying.
	Message string `json:"message"`
	// Currency is the program's, in which a fixed override is written.
	Currency string `json:"currency"`
	// Commission overrides the program's rule for this affiliate; nil: the program's rule.
	Commission *Rule `json:"commission"`
	// Answers are the affiliate's answers to the program's questions, as it applied.
	Answers   []Answer  `json:"answers"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// ApplyInput is an affiliate's application to a program.
type ApplyInput struct {
	ProgramID string `json:"program_id"`
	Message   string `json:"message"`
	// Answers answer the program's questions, one per question in their order.
	Answers []string `json:"answers"`
}

// PartnershipFilter narrows a partnership list; empty fields do not filter.
type PartnershipFilter struct {
	Status    string
	ProgramID string
}

// PartnershipPatch changes a partnership's commission override (null: back to the program's
// rule).
type PartnershipPatch struct {
	Commission Optional[RuleInput] `json:"commission"`
}

const partnershipColumns = `s.id, s.program_id, s.affiliate_id, s.advertiser_id, s.status, s.message, s.commission_type,
	s.commission_value, p.currency, s.created_at, s.updated_at, s.recurring_months, s.recurring_lifetime, s.answers,
	(SELECT name FROM companies WHERE id = s.affiliate_id), (SELECT name FROM companies WHERE id = s.advertiser_id)`

func scanPartnership(row pgx.CollectableRow) (Partnership, error) {
	var (
		p        Partnership
		ruleType *string
		value    *int64
		months   *int
		lifetime bool
	)
	err := row.Scan(&p.ID, &p.ProgramID, &p.AffiliateID, &p.AdvertiserID, &p.Status, &p.Message, &ruleType, &value, &p.Currency,
		&p.CreatedAt, &p.UpdatedAt, &months, &lifetime, &p.Answers, &p.AffiliateName, &p.AdvertiserName)
	if ruleType != nil && value != nil {
		p.Commission = &Rule{Type: *ruleType, Value: *value, Currency: p.Currency, Recurring: RecurringFrom(months, lifetime)}
	}
	p.CreatedAt, p.UpdatedAt = p.CreatedAt.UTC(), p.UpdatedAt.UTC()
	return p, err
}

// partnershipScope is the SQL condition on partnerships s that the actor may see: its own,
// from either side.
func partnershipScope(a Actor) string {
	switch a.Kind {
	case identity.Advertiser:
		return `s.advertiser_id = @company`
	case identity.Affiliate:
		return `s.affiliate_id = @company`
	}
	return `false`
}

const partnershipFrom = ` FROM partnerships s JOIN programs p ON p.id = s.program_id WHERE `

// Apply makes the actor (an affiliate) apply to a program it may see by id. A public program
// approves at once; an approval program starts pending. Applying again returns the existing
// partnership, whatever its status, with created false. A new partnership writes
// partnership.created to the outbox in the same transaction.
func (s *Service) Apply(ctx context.Context, a Actor, in ApplyInput) (Partnership, bool, error) {
	if a.Kind != identity.Affiliate {
		return Partnership{}, false, &ForbiddenError{Reason: "only affiliates apply to programs"}
	}
	if !a.canWrite() {
		return Partnership{}, false, &ForbiddenError{Reason: "only owners and admins can apply to programs"}
	}
	v := &validator{}
	v.id("program_id", ids.Program, in.ProgramID)
	v.text("message", in.Message, 0, 2000, true)
	if err := v.err(); err != nil {
		return Partnership{}, false, err
	}
	var (
		out     Partnership
		created bool
	)
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		args := pgx.NamedArgs{"program": in.ProgramID, "company": a.CompanyID}
		existing := `SELECT ` + partnershipColumns + partnershipFrom + `s.program_id = @program AND s.affiliate_id = @company`
		var err error
		if out, err = queryOne(ctx, tx, "partnership", existing, args, scanPartnership); !errors.Is(err, ErrNotFound) {
			return err
		}
		// FOR SHARE: the program cannot change visibility or status under the decision.
		prog, err := queryOne(ctx, tx, "program", `SELECT `+programColumns+` FROM programs p WHERE p.id = @program AND `+scope(a, false)+` FOR SHARE OF p`,
			args, scanProgram)
		if err != nil {
			return err
		}
		v := &validator{}
		answered := answers(prog.Questions, in.Answers, v)
		if err := v.err(); err != nil {
			return err
		}
		now := s.now()
		out = Partnership{ID: ids.New(ids.Partnership), ProgramID: prog.ID, AffiliateID: a.CompanyID, AdvertiserID: prog.AdvertiserID,
			Status: Pending, Message: in.Message, Currency: prog.Currency, Answers: answered, CreatedAt: now, UpdatedAt: now}
		if prog.Visibility == Public {
			out.Status = Approved
		}
		tag, err := tx.Exec(ctx, `INSERT INTO partnerships (id, program_id, affiliate_id, advertiser_id, status, message, created_at, updated_at, answers)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $7, $8) ON CONFLICT (program_id, affiliate_id) DO NOTHING`,
			out.ID, out.ProgramID, out.AffiliateID, out.AdvertiserID, out.Status, out.Message, now, out.Answers)
		if err != nil {
			return fmt.Errorf("create partnership: %w", err)
		}
		if tag.RowsAffected() == 0 {
			// A concurrent application won the unique key; it has committed, so this
			// statement sees it.
			out, err = queryOne(ctx, tx, "partnership", existing, args, scanPartnership)
			return err
		}
		created = true
		if err := writeCreatedEvent(ctx, tx, out); err != nil {
			return err
		}
		// Read back for the companies' names.
		out, err = queryOne(ctx, tx, "partnership", existing, args, scanPartnership)
		return err
	})
	if err != nil {
		return Partnership{}, false, err
	}
	return out, created, nil
}

func writeCreatedEvent(ctx context.Context, tx pgx.Tx, p Partnership) error {
	data, err := json.Marshal(events.PartnershipData{ID: p.ID, Type: "partnership", Amount: money.Format(0, p.Currency), Status: p.Status,
		Currency: p.Currency, ProgramID: p.ProgramID, AffiliateID: p.AffiliateID, AdvertiserID: p.AdvertiserID, CreatedAt: p.CreatedAt})
	if err != nil {
		return fmt.Errorf("encode partnership event: %w", err)
	}
	_, err = outbox.Write(ctx, tx, p.ID, events.Envelope{Type: events.PartnershipCreated, OccurredAt: p.CreatedAt,
		AdvertiserID: p.AdvertiserID, AffiliateID: p.AffiliateID, ProgramID: p.ProgramID, Data: data})
	return err
}

// ListPartnerships lists the actor's partnerships (as advertiser or affiliate), newest first.
func (s *Service) ListPartnerships(ctx context.Context, a Actor, f PartnershipFilter, pr page.Request) ([]Partnership, string, error) {
	v := &validator{}
	if f.Status != "" {
		v.oneOf("status", f.Status, Pending, Approved, Rejected, Suspended)
	}
	if f.ProgramID != "" {
		v.id("program_id", ids.Program, f.ProgramID)
	}
	if err := v.err(); err != nil {
		return nil, "", err
	}
	rows, _ := s.db.Query(ctx, `SELECT `+partnershipColumns+partnershipFrom+partnershipScope(a)+
		` AND (@status = '' OR s.status = @status) AND (@program = '' OR s.program_id = @program)
		AND (@before = '' OR s.id < @before) ORDER BY s.id DESC LIMIT @limit`,
		pgx.NamedArgs{"company": a.CompanyID, "status": f.Status, "program": f.ProgramID, "before": pr.Before, "limit": pr.Limit + 1})
	list, err := pgx.CollectRows(rows, scanPartnership)
	if err != nil {
		return nil, "", fmt.Errorf("list partnerships: %w", err)
	}
	list, next := page.Cut(list, pr.Limit, func(p Partnership) string { return p.ID })
	return list, next, nil
}

// SetPartnershipStatus moves a partnership of the actor's programs to status to (approve,
// reject, suspend); a move the state machine does not allow is a TransitionError.
func (s *Service) SetPartnershipStatus(ctx context.Context, a Actor, id, to string) (Partnership, error) {
	return s.updatePartnership(ctx, a, id, func(tx pgx.Tx, p *Partnership) error {
		if err := checkTransition("partnership", partnershipTransitions, p.Status, to); err != nil {
			return err
		}
		p.Status = to
		// Tracking links of the partnership start or stop working.
		return notifyLinksChanged(ctx, tx, p.ProgramID)
	})
}

// UpdatePartnership sets or clears the commission override of a partnership of the actor's
// programs; the rule is in the program's currency.
func (s *Service) UpdatePartnership(ctx context.Context, a Actor, id string, pp PartnershipPatch) (Partnership, error) {
	return s.updatePartnership(ctx, a, id, func(_ pgx.Tx, p *Partnership) error {
		switch o := pp.Commission; {
		case !o.Set:
		case o.Null:
			p.Commission = nil
		default:
			r, errs := parseRule(o.Value, p.Currency, "commission")
			if len(errs) > 0 {
				return &ValidationError{Fields: errs}
			}
			p.Commission = &r
		}
		return nil
	})
}

// updatePartnership locks a partnership of the actor's programs, lets change modify it and
// writes status, override and updated_at back.
func (s *Service) updatePartnership(ctx context.Context, a Actor, id string, change func(tx pgx.Tx, p *Partnership) error) (Partnership, error) {
	if err := a.requireAdvertiserWriter(); err != nil {
		return Partnership{}, err
	}
	var p Partnership
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		var err error
		p, err = queryOne(ctx, tx, "partnership", `SELECT `+partnershipColumns+partnershipFrom+`s.id = @id AND `+partnershipScope(a)+` FOR UPDATE OF s`,
			pgx.NamedArgs{"id": id, "company": a.CompanyID}, scanPartnership)
		if err != nil {
			return err
		}
		if err := change(tx, &p); err != nil {
			return err
		}
		p.UpdatedAt = s.now()
		var ruleType *string
		var value *int64
		var months *int
		var lifetime bool
		if p.Commission != nil {
			ruleType, value = &p.Commission.Type, &p.Commission.Value
			months, lifetime = p.Commission.Recurring.Columns()
		}
		if _, err := tx.Exec(ctx, `UPDATE partnerships SET status = $2, commission_type = $3, commission_value = $4, updated_at = $5,
			recurring_months = $6, recurring_lifetime = $7 WHERE id = $1`,
			p.ID, p.Status, ruleType, value, p.UpdatedAt, months, lifetime); err != nil {
			return fmt.Errorf("update partnership: %w", err)
		}
		return nil
	})
	if err != nil {
		return Partnership{}, err
	}
	return p, nil
}

// ErrDecided is JoinInvited's answer when the affiliate's partnership of the program was
// rejected or suspended: the advertiser decided, and an old invitation does not undo that.
var ErrDecided = errors.New("the partnership with this program was rejected or suspended")

// JoinInvited makes the affiliate an approved partner of the program inside tx (the
// caller's, which also marks the invitation accepted), whatever the program's visibility:
// its advertiser invited the affiliate. A pending application is approved; an approved
// partnership is returned as it is, with created false.
func JoinInvited(ctx context.Context, tx pgx.Tx, now time.Time, programID, affiliateID string) (Partnership, bool, error) {
	args := pgx.NamedArgs{"program": programID, "company": affiliateID}
	existing := `SELECT ` + partnershipColumns + partnershipFrom + `s.program_id = @program AND s.affiliate_id = @company FOR UPDATE OF s`
	p, err := queryOne(ctx, tx, "partnership", existing, args, scanPartnership)
	switch {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return Partnership{}, false, err
	case p.Status == Approved:
		return p, false, nil
	case p.Status == Pending:
		p.Status, p.UpdatedAt = Approved, now
		if _, err := tx.Exec(ctx, `UPDATE partnerships SET status = $2, updated_at = $3 WHERE id = $1`, p.ID, p.Status, now); err != nil {
			return Partnership{}, false, fmt.Errorf("approve invited partnership: %w", err)
		}
		return p, false, notifyLinksChanged(ctx, tx, p.ProgramID)
	default:
		return Partnership{}, false, ErrDecided
	}
	var prog struct{ advertiser, currency string }
	if err := tx.QueryRow(ctx, `SELECT advertiser_id, currency FROM programs WHERE id = $1 AND status <> $2 FOR SHARE`, programID, ProgramArchived).
		Scan(&prog.advertiser, &prog.currency); errors.Is(err, pgx.ErrNoRows) {
		return Partnership{}, false, &NotFoundError{What: "program"}
	} else if err != nil {
		return Partnership{}, false, fmt.Errorf("invited program: %w", err)
	}
	p = Partnership{ID: ids.New(ids.Partnership), ProgramID: programID, AffiliateID: affiliateID, AdvertiserID: prog.advertiser,
		Status: Approved, Currency: prog.currency, CreatedAt: now.UTC(), UpdatedAt: now.UTC()}
	if _, err := tx.Exec(ctx, `INSERT INTO partnerships (id, program_id, affiliate_id, advertiser_id, status, message, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, '', $6, $6)`, p.ID, p.ProgramID, p.AffiliateID, p.AdvertiserID, p.Status, p.CreatedAt); err != nil {
		return Partnership{}, false, fmt.Errorf("create invited partnership: %w", err)
	}
	if err := writeCreatedEvent(ctx, tx, p); err != nil {
		return Partnership{}, false, err
	}
	// Read back as every partnership is read: its answers (none) and the companies' names.
	if p, err = queryOne(ctx, tx, "partnership", existing, args, scanPartnership); err != nil {
		return Partnership{}, false, err
	}
	return p, true, notifyLinksChanged(ctx, tx, p.ProgramID)
}
