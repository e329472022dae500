package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/partnerstream/partnerstream/internal/fraud"
	"github.com/partnerstream/partnerstream/internal/ids"
)

// FraudService is what the fraud-rule routes need (fraud.Service).
type FraudService interface {
	Get(ctx context.Context, advertiserID, programID string) (fraud.Program, error)
	Update(ctx context.Context, advertiserID, programID string, changes map[string]fraud.Change) (fraud.Program, error)
	SetExemptions(ctx context.Context, advertiserID, partnershipID string, codes []string) ([]string, error)
}

// MountFraud adds the dashboard's fraud-rule routes: an advertiser reads its programs' rules
// (every member) and changes them and a partnership's exemptions (owners and admins).
// Another company's program or partnership is a 404.
func (s *Server) MountFraud(svc FraudService) {
	h := fraudHandlers{svc: svc}
	s.app.Get("/api/programs/:id/fraud-rules", advertiserOnly, h.get)
	s.app.Patch("/api/programs/:id/fraud-rules", advertiserOnly, requireAdminTo("change fraud rules"), h.update)
	s.app.Put("/api/partnerships/:id/fraud-exemptions", advertiserOnly, requireAdminTo("change fraud rules"), h.exempt)
}

type fraudHandlers struct{ svc FraudService }

var errNoFraudProgram = NewProblem(fiber.StatusNotFound, "not_found", "no such program of yours")

func (h fraudHandlers) get(c *fiber.Ctx) error {
	id := c.Params("id")
	if !ids.Valid(ids.Program, id) {
		return errNoFraudProgram
	}
	p, err := h.svc.Get(c.UserContext(), Caller(c).CompanyID, id)
	if err != nil {
		return fraudProblem(err)
	}
	return c.JSON(fraudView(p))
}

// fraudRuleInput is one rule's change: the fields given replace the current ones.
type fraudRuleInput struct {
	Enabled *bool                      `json:"enabled"`
	Action  *string                    `json:"action"`
	Shadow  *bool                      `json:"shadow"`
	Params  map[string]json.RawMessage `json:"params"`
}

func (h fraudHandlers) update(c *fiber.Ctx) error {
	id := c.Params("id")
	if !ids.Valid(ids.Program, id) {
		return errNoFraudProgram
	}
	var in struct {
		Rules map[string]fraudRuleInput `json:"rules"`
	}
	if err := DecodeJSON(c, &in); err != nil {
		return err
	}
	if len(in.Rules) == 0 {
		return Invalid(FieldError{Field: "rules", Message: "is required: an object of the rules to change, by reason code"})
	}
	changes, err := fraudChanges(in.Rules)
	if err != nil {
		return err
	}
	p, err := h.svc.Update(c.UserContext(), Caller(c).CompanyID, id, changes)
	if err != nil {
		return fraudProblem(err)
	}
	return c.JSON(fraudView(p))
}

// fraudChanges reads the rules of a request as the fraud package takes them; a parameter that
// is neither a number nor a list of strings is a 400 naming it.
func fraudChanges(rules map[string]fraudRuleInput) (map[string]fraud.Change, error) {
	changes := make(map[string]fraud.Change, len(rules))
	var errs []FieldError
	for code, r := range rules {
		ch := fraud.Change{Enabled: r.Enabled, Action: r.Action, Shadow: r.Shadow, Params: map[string]any{}}
		for name, raw := range r.Params {
			v, ok := paramValue(raw)
			if !ok {
				errs = append(errs, FieldError{Field: "rules." + code + ".params." + name, Message: "must be a whole number, a list of strings or a string"})
				continue
			}
			ch.Params[name] = v
		}
		changes[code] = ch
	}
	if errs != nil {
		return nil, Invalid(errs...)
	}
	return changes, nil
}

// paramValue reads a parameter as the fraud package takes it: an int64, a []string or a
// string (an expression).
func paramValue(raw json.RawMessage) (any, bool) {
	var n int64
	dec := json.NewDecoder(bytes.NewReader(raw))
	if dec.Decode(&n) == nil {
		return n, true
	}
	var text string
	if json.Unmarshal(raw, &text) == nil {
		return text, true
	}
	var list []string
	if json.Unmarshal(raw, &list) == nil && list != nil {
		return list, true
	}
	return nil, false
}

func (h fraudHandlers) exempt(c *fiber.Ctx) error {
	id := c.Params("id")
	if !ids.Valid(ids.Partnership, id) {
		return NewProblem(fiber.StatusNotFound, "not_found", "no such partnership in your programs")
	}
	var in struct {
		Codes []string `json:"codes"`
	}
	if err := DecodeJSON(c, &in); err != nil {
		return err
	}
	if in.Codes == nil {
		return Invalid(FieldError{Field: "codes", Message: "is required: the reason codes switched off for the partnership ([] for none)"})
	}
	codes, err := h.svc.SetExemptions(c.UserContext(), Caller(c).CompanyID, id, in.Codes)
	if err != nil {
		return fraudProblem(err)
	}
	return c.JSON(fiber.Map{"partnership_id": id, "codes": codes})
}

func fraudProblem(err error) error {
	var v *fraud.ValidationError
	switch {
	case errors.As(err, &v):
		errs := make([]FieldError, len(v.Fields))
		for i, f := range v.Fields {
			errs[i] = FieldError{Field: f.Field, Message: f.Message}
		}
		return Invalid(errs...)
	case errors.Is(err, fraud.ErrNotFound):
		return NewProblem(fiber.StatusNotFound, "not_found", "no such program or partnership of yours")
	}
	return err
}

type fraudRuleJSON struct {
	Code    string         `json:"code"`
	Stage   string         `json:"stage"`
	Enabled bool           `json:"enabled"`
	Action  string         `json:"action"`
	Shadow  bool           `json:"shadow"`
	Params  map[string]any `json:"params"`
}

type fraudProgramJSON struct {
	ProgramID  string              `json:"program_id"`
	Rules      []fraudRuleJSON     `json:"rules"`
	Exemptions map[string][]string `json:"exemptions"`
	UpdatedAt  *time.Time          `json:"updated_at"`
}

func fraudView(p fraud.Program) fraudProgramJSON {
	out := fraudProgramJSON{ProgramID: p.ProgramID, Exemptions: p.Exemptions, UpdatedAt: p.UpdatedAt}
	for _, r := range fraud.Catalogue {
		s := p.Settings[r.Code]
		params := map[string]any{}
		for _, prm := range r.Params {
			params[prm.Name] = s.Param(prm)
		}
		out.Rules = append(out.Rules, fraudRuleJSON{Code: r.Code, Stage: r.Stage, Enabled: s.Enabled, Action: s.Action, Shadow: s.Shadow, Params: params})
	}
	return out
}

// riskJSON is a conversion's fraud verdict as the API shows it: the rules that fired and the
// hold; shadow results only to the advertiser.
type riskJSON struct {
	Held    bool          `json:"held"`
	HeldAt  *time.Time    `json:"held_at"`
	Reasons []findingJSON `json:"reasons"`
	Shadow  []findingJSON `json:"shadow,omitempty"`
}

type findingJSON struct {
	Code      string    `json:"code"`
	Action    string    `json:"action"`
	Value     string    `json:"value"`
	Stage     string    `json:"stage"`
	DecidedAt time.Time `json:"decided_at"`
}

func riskView(v fraud.Verdict, advertiser bool) riskJSON {
	out := riskJSON{Held: v.HeldAt != nil, HeldAt: v.HeldAt, Reasons: []findingJSON{}}
	for _, f := range v.Findings {
		j := findingJSON{Code: f.Code, Action: f.Action, Value: f.Observed, Stage: f.Stage, DecidedAt: f.DecidedAt}
		switch {
		case !f.Shadow:
			out.Reasons = append(out.Reasons, j)
		case advertiser:
			out.Shadow = append(out.Shadow, j)
		}
	}
	return out
}
