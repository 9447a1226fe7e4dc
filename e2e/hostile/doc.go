// Package hostile holds the hostile-shape matrix, as tests: for every
// entry point of RELIABILITY.md's inventory, the generic hostile shapes
// (huge, deep, wide, cyclic, slow, endless, malformed, wrong type), each
// sent to a real orchestra running under prlimit --as=4GiB, which must
// answer with a clear error and keep serving an innocent client. The
// downstream server, the planner's model and the JWT issuer are fakes of
// the test binary that answer as each case says.
//
//	go test ./e2e/hostile                                   # the matrix (minutes)
//	go test ./e2e/hostile -run TestReliabilityMatrix -update # RELIABILITY.md's counts
package hostile
