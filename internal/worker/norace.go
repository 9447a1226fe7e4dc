//go:build !race

package worker

// raceFactor multiplies the address space a worker may grow by; see race.go.
const raceFactor = 1

var raceEnv []string
