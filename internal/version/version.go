// Package version holds build information, set at link time by the Makefile
// (-ldflags "-X github.com/partnerstream/partnerstream/internal/version.Version=...").
package version

import "runtime"

var (
	// Version is the release (git describe) of this build.
	Version = "dev"
	// Revision is the git commit of this build.
	Revision = "unknown"
)

// String is the one-line description printed by `partnerstream version`.
func String() string {
	return "partnerstream " + Version + " (" + Revision + ", " + runtime.Version() + ")"
}
