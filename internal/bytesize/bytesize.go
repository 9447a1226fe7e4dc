// Package bytesize writes byte counts for people, in the units the
// configuration's limits are usually set in:
//
//	bytesize.Format(4 << 20) // "4 MiB"
//	bytesize.Format(1500)    // "1500 bytes"
package bytesize

import "strconv"

// Format renders n as whole MiB or KiB when it is a multiple of one, else
// as bytes.
func Format(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}
