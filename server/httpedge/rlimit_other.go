//go:build !unix

package httpedge

// openFileLimit returns 0: the limit of open files is not known here.
func openFileLimit() int { return 0 }
