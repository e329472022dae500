// Package logging builds the platform's structured JSON logger (log/slog).
package logging

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// New returns a JSON logger at the given level (debug, info, warn, error). Callers tag it
// with a "component" attribute, so lines of `partnerstream dev` (all components in one
// process) stay apart.
func New(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(level))); err != nil {
		return nil, fmt.Errorf("log level %q: want debug, info, warn or error", level)
	}
	h := slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l})
	return slog.New(h), nil
}
