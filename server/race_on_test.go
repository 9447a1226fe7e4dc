//go:build race

package server_test

// raceEnabled: the race detector slows the engine ten-fold or more, so the
// heaviest tests run fewer of their identical concurrent calls under it.
const raceEnabled = true
