package webhooks

import (
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// apiFields names the CRD's fields as the API does.
var apiFields = map[string]string{
	"spec.companyID":           "company_id",
	"spec.url":                 "url",
	"spec.events":              "events",
	"spec.description":         "description",
	"spec.suspend":             "suspended",
	"spec.rotationGracePeriod": "rotation_grace_period_seconds",
}

// classify turns the API server's refusal into a ValidationError and a missing object into
// ErrNotFound; anything else is wrapped as it is.
func classify(op string, err error) error {
	var status apierrors.APIStatus
	switch {
	case errors.Is(err, ErrNotFound), apierrors.IsNotFound(err):
		return ErrNotFound
	case apierrors.IsInvalid(err) && errors.As(err, &status):
		st := status.Status()
		v := &ValidationError{Message: st.Message}
		if st.Details != nil {
			for _, c := range st.Details.Causes {
				if strings.HasPrefix(c.Message, "Invalid value: null: some validation rules were not checked") {
					continue // says only that the CEL rules wait for the other errors
				}
				field := c.Field
				if field == "<nil>" { // a rule on the whole object
					field = ""
				}
				v.Fields = append(v.Fields, FieldError{Field: apiField(field), Message: c.Message})
			}
		}
		return v
	default:
		return fmt.Errorf("%s: %w", op, err)
	}
}

// apiField maps "spec.events[1]" to "events[1]"; unknown paths stay as they are.
func apiField(path string) string {
	for crd, api := range apiFields {
		if rest, ok := strings.CutPrefix(path, crd); ok && (rest == "" || rest[0] == '[' || rest[0] == '.') {
			return api + rest
		}
	}
	return path
}
