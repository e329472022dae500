//go:build race

package clickid

// raceEnabled: the race detector makes values escape that otherwise stay on the stack, so
// allocation counts are checked only without it.
const raceEnabled = true
