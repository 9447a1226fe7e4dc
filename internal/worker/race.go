//go:build race

package worker

// raceFactor multiplies the address space a worker may grow by: the race
// detector maps several bytes of shadow memory for each byte of heap.
const raceFactor = 8

// raceEnv spares a worker the race detector's one-second pause at exit.
var raceEnv = []string{"GORACE=atexit_sleep_ms=0"}
