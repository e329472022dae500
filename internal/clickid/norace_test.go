//go:build !race

package clickid

const raceEnabled = false
