// Package programs owns advertisers' programs and promotions and the partnerships between
// affiliates and programs, in Postgres.
//
// Who sees what (docs/programs.md says it to users):
//   - an advertiser sees and manages only its own programs, their promotions and partnerships;
//   - an affiliate's listings show active public programs plus the programs it has a
//     partnership with that is not rejected; by id it also reaches any active approval
//     program (approval programs are unlisted: their advertiser shares the id with the
//     affiliates it wants, who apply and wait for approval).
//
// A foreign or invisible id is ErrNotFound, never ErrForbidden, so ids of other companies'
// records leak nothing.
package programs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/links"
)

// Program statuses.
const (
	ProgramActive   = "active"
	ProgramPaused   = "paused"
	ProgramArchived = "archived"
)

// Program visibilities: public programs are listed to every affiliate and approve
// applications at once; approval programs are unlisted and approve by hand.
const (
	Public   = "public"
	Approval = "approval"
)

// Partnership statuses.
const (
	Pending   = "pending"
	Approved  = "approved"
	Rejected  = "rejected"
	Suspended = "suspended"
)

// Actor is the caller: its company and, for dashboard users, its role.
type Actor struct {
	CompanyID string
	Kind      string // identity.Advertiser or identity.Affiliate
	// Role is owner, admin or member for dashboard users and empty for API keys, which act
	// for the whole company.
	Role string
}

// canWrite reports whether the actor's role may change things: owners, admins and API keys.
func (a Actor) canWrite() bool {
	return a.Role == "" || a.Role == "owner" || a.Role == "admin"
}

// requireAdvertiserWriter is the check of every advertiser-side change.
func (a Actor) requireAdvertiserWriter() error {
	if a.Kind != identity.Advertiser {
		return &ForbiddenError{Reason: "only advertisers manage programs and partnerships"}
	}
	if !a.canWrite() {
		return &ForbiddenError{Reason: "only owners and admins can change programs and partnerships"}
	}
	return nil
}

// ErrNotFound is matched by every NotFoundError.
var ErrNotFound = errors.New("not found")

// NotFoundError is a record that does not exist or that the caller may not see.
type NotFoundError struct{ What string }

func (e *NotFoundError) Error() string        { return "no such " + e.What }
func (e *NotFoundError) Is(target error) bool { return target == ErrNotFound }

// ForbiddenError is an action the caller's company kind or role does not allow.
type ForbiddenError struct{ Reason string }

func (e *ForbiddenError) Error() string { return e.Reason }

// FieldError names one invalid input field.
type FieldError struct {
	Field   string
	Message string
}

// ValidationError lists every invalid field of an input, so a client fixes them in one round.
type ValidationError struct{ Fields []FieldError }

func (e *ValidationError) Error() string {
	msgs := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		msgs[i] = f.Field + ": " + f.Message
	}
	return "invalid input: " + strings.Join(msgs, "; ")
}

// TransitionError is a status change the state machine does not allow; Allowed lists the
// statuses reachable from From (empty for a final status).
type TransitionError struct {
	What     string // "partnership" or "program"
	From, To string
	Allowed  []string
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("a %s cannot go from %s to %s", e.What, e.From, e.To)
}

// transitions are the state machines; a status missing as a key is unknown.
var (
	programTransitions = map[string][]string{
		ProgramActive:   {ProgramPaused, ProgramArchived},
		ProgramPaused:   {ProgramActive, ProgramArchived},
		ProgramArchived: {},
	}
	partnershipTransitions = map[string][]string{
		Pending:   {Approved, Rejected},
		Approved:  {Suspended},
		Rejected:  {},
		Suspended: {},
	}
)

func checkTransition(what string, machine map[string][]string, from, to string) error {
	for _, s := range machine[from] {
		if s == to {
			return nil
		}
	}
	return &TransitionError{What: what, From: from, To: to, Allowed: append([]string{}, machine[from]...)}
}

// Optional is a field of a PATCH body: Set when the key was present, Null when its value was
// JSON null (clearing an optional field).
type Optional[T any] struct {
	Set   bool
	Null  bool
	Value T
}

// UnmarshalJSON records that the key was present.
func (o *Optional[T]) UnmarshalJSON(b []byte) error {
	o.Set = true
	if string(b) == "null" {
		o.Null = true
		return nil
	}
	return json.Unmarshal(b, &o.Value)
}

// Options of the service.
type Options struct {
	// Now is the clock of timestamps and of which promotions are active; time.Now if nil.
	Now func() time.Time
}

// Service is the programs domain on Postgres.
type Service struct {
	db  *pgxpool.Pool
	now func() time.Time
}

// NewService returns the service on the pool.
func NewService(db *pgxpool.Pool, o Options) *Service {
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Service{db: db, now: func() time.Time { return o.Now().UTC() }}
}

// notifyLinksChanged tells the redirect's link caches on every replica, when tx commits,
// that the links of the program may have changed (program status, landing URL, click
// parameter, a promotion, a partnership's status).
func notifyLinksChanged(ctx context.Context, tx pgx.Tx, programID string) error {
	if _, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, links.ChangedChannel, links.ProgramPayload(programID)); err != nil {
		return fmt.Errorf("notify link change of %s: %w", programID, err)
	}
	return nil
}
