//go:build !race

package server_test

// raceEnabled: see race_on_test.go.
const raceEnabled = false
