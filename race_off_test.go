//go:build !race

package kvroute

const raceEnabled = false
