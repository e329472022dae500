package httpapi

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/page"
	"github.com/partnerstream/partnerstream/internal/timebound"
)

// FieldError names one invalid input field: Code is what a client switches on (the dashboard
// translates it), Message the English sentence for API users.
type FieldError struct {
	Field   string `json:"field"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Invalid is the 400 problem for input that fails validation, listing each field with its
// code (FieldCode of its message when the validator gave none).
func Invalid(errs ...FieldError) *Problem {
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Field + ": " + e.Message
		if e.Code == "" {
			errs[i].Code = FieldCode(e.Message)
		}
	}
	return NewProblem(fiber.StatusBadRequest, "validation_failed", strings.Join(msgs, "; ")).With("errors", errs)
}

// DecodeJSON reads a JSON object body strictly: unknown fields, a key given twice in one
// object (at any depth), trailing data and wrong types are 400s that say what is wrong.
func DecodeJSON(c *fiber.Ctx, v any) error {
	if ct := string(c.Request().Header.ContentType()); ct != "" && !strings.HasPrefix(ct, fiber.MIMEApplicationJSON) {
		return NewProblem(fiber.StatusUnsupportedMediaType, "unsupported_media_type", "send the body as application/json")
	}
	dec := json.NewDecoder(bytes.NewReader(c.Body()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return NewProblem(fiber.StatusBadRequest, "invalid_json", describeJSONError(err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return NewProblem(fiber.StatusBadRequest, "invalid_json", "the body must hold exactly one JSON object")
	}
	if k := repeatedKey(c.Body()); k != "" {
		return NewProblem(fiber.StatusBadRequest, "invalid_json", "the key "+strconv.Quote(k)+" appears twice in one object (keys are matched without regard to case)")
	}
	return nil
}

// decodeOptionalJSON decodes a body when there is one; an empty (or blank) body leaves v as
// it is.
func decodeOptionalJSON(c *fiber.Ctx, v any) error {
	if len(bytes.TrimSpace(c.Body())) == 0 {
		return nil
	}
	return DecodeJSON(c, v)
}

func describeJSONError(err error) string {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.Is(err, io.EOF):
		return "the body is empty; send a JSON object"
	case errors.As(err, &typeErr) && typeErr.Field == "":
		return "the body must be a JSON object, not " + jsonValueName(typeErr.Value)
	case errors.As(err, &typeErr):
		return fmt.Sprintf("field %q must be %s, not %s", typeErr.Field, jsonTypeName(typeErr.Type), jsonValueName(typeErr.Value))
	case errors.As(err, &syntaxErr):
		return fmt.Sprintf("malformed JSON at byte %d", syntaxErr.Offset)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return "unknown field " + strings.TrimPrefix(err.Error(), "json: unknown field ")
	default:
		return "malformed JSON body"
	}
}

// textUnmarshaler is the interface of types that JSON reads from a string (times, ids).
var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()

// jsonTypeName says what JSON a Go type takes, in the API's words: problems never name Go
// types, which mean nothing to a client.
func jsonTypeName(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(textUnmarshaler) {
		return "a string"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number in range"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "another JSON type"
}

// jsonValueName names the JSON value found, from UnmarshalTypeError.Value ("number",
// "number 1e400", "string", "array", "object", "bool").
func jsonValueName(v string) string {
	switch kind, _, _ := strings.Cut(v, " "); kind {
	case "bool":
		return "true or false"
	case "array", "object":
		return "an " + kind
	case "string":
		return "a string"
	case "number":
		if v != kind {
			return "a number out of range"
		}
		return "a number"
	}
	return "this value"
}

// PageRequest parses the limit and cursor query parameters. A cursor this API did not return
// is its own code, invalid_cursor, so a client can tell it to start over from the first page.
func PageRequest(c *fiber.Ctx) (page.Request, error) {
	p, err := page.Parse(c.Query("limit"), c.Query("cursor"))
	switch {
	case errors.Is(err, page.ErrBadCursor):
		return page.Request{}, NewProblem(fiber.StatusBadRequest, "invalid_cursor", err.Error()+"; start again without it").
			With("errors", []FieldError{{Field: "cursor", Code: "invalid", Message: err.Error()}})
	case err != nil:
		return page.Request{}, Invalid(FieldError{Field: "limit", Message: err.Error()})
	}
	return p, nil
}

// parseTime reads an RFC 3339 time, or a date (midnight UTC) when dates is true, within the
// range the platform takes (timebound). "" is the zero time: none given.
func parseTime(field, s string, dates bool) (time.Time, error) {
	t, bad := timeField(field, s, dates)
	if bad != nil {
		return time.Time{}, Invalid(*bad)
	}
	return t, nil
}

// timeField is parseTime's rule, answering what is wrong as one field's error.
func timeField(field, s string, dates bool) (time.Time, *FieldError) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil && dates {
		t, err = time.Parse(time.DateOnly, s)
	}
	switch {
	case err != nil && dates:
		return time.Time{}, &FieldError{Field: field, Message: "must be an RFC 3339 time (2026-03-14T15:09:26Z) or a date (2026-03-14)"}
	case err != nil:
		return time.Time{}, &FieldError{Field: field, Message: "must be an RFC 3339 time such as 2026-03-14T15:09:26Z"}
	case !timebound.Contains(t):
		return time.Time{}, &FieldError{Field: field, Message: timebound.Message}
	}
	return t.UTC(), nil
}

// timeRange parses from (inclusive) and to (exclusive): RFC 3339 times or dates, either
// optional, to after from. It returns what is wrong.
func timeRange(from, to *time.Time, fromS, toS string) []FieldError {
	var errs []FieldError
	for _, q := range []struct {
		field, v string
		dst      *time.Time
	}{{"from", fromS, from}, {"to", toS, to}} {
		t, bad := timeField(q.field, q.v, true)
		if bad != nil {
			errs = append(errs, *bad)
		}
		*q.dst = t
	}
	if !from.IsZero() && !to.IsZero() && !to.After(*from) {
		errs = append(errs, FieldError{Field: "to", Message: "must be after from"})
	}
	return errs
}

// requireAdminTo lets owners and admins change settings; members may only read. API-key
// callers are not sessions and never reach it (routes that take keys do not use it).
func requireAdminTo(action string) fiber.Handler {
	return func(c *fiber.Ctx) error {
		switch Caller(c).Role {
		case "owner", "admin":
			return c.Next()
		}
		return NewProblem(fiber.StatusForbidden, "forbidden", "only owners and admins can "+action)
	}
}

// advertiserOnly guards the routes that register or decide conversions and payouts: an
// affiliate reads.
func advertiserOnly(c *fiber.Ctx) error {
	if Caller(c).CompanyKind != identity.Advertiser {
		return NewProblem(fiber.StatusForbidden, "advertiser_only", "only the advertiser of a program registers and decides its conversions and payouts")
	}
	return c.Next()
}

// nullableString reads a required field that may be null (nil) or a string.
func nullableString(field string, raw json.RawMessage) (*string, error) {
	switch string(raw) {
	case "":
		return nil, Invalid(FieldError{Field: field, Message: "is required (null removes it)"})
	case "null":
		return nil, nil
	}
	var v string
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, Invalid(FieldError{Field: field, Message: "must be a string or null"})
	}
	return &v, nil
}

// queryBool reads an optional true/false query parameter.
func queryBool(c *fiber.Ctx, name string) (bool, error) {
	v := c.Query(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, Invalid(FieldError{Field: name, Message: "must be true or false"})
	}
	return b, nil
}
