//go:build !unix

package embedded

// lockDir does not guard the directory on platforms without flock; the embedded broker is a
// development tool and PartnerStream develops on Linux and macOS.
func lockDir(string) (func(), error) { return func() {}, nil }
