package bytesize

import "testing"

func TestFormat(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0 bytes", 1000: "1000 bytes", 1024: "1 KiB", 1536: "1536 bytes",
		4 << 20: "4 MiB", 256 << 10: "256 KiB", 1<<20 + 1: "1048577 bytes",
	} {
		if got := Format(n); got != want {
			t.Errorf("Format(%d) = %q, want %q", n, got, want)
		}
	}
}
