package rank

import (
	"slices"
	"testing"
)

func TestTerms(t *testing.T) {
	got := Terms("getWeatherForecast: the files_in a dir, HTTP2 queries")
	want := []string{"weather", "forecast", "file", "dir", "http2", "query"}
	if !slices.Equal(got, want) {
		t.Errorf("Terms = %q, want %q", got, want)
	}
}

func TestTopRanksTheMatchingDocumentFirst(t *testing.T) {
	ix := New([]string{
		"send_email: Send an email to a recipient",
		"read_file: Read the contents of a file",
		"list_directory: List the files of a directory",
		"get_weather: The weather forecast for a city",
	})
	if got := ix.Top("what's the weather in Paris", 1); !slices.Equal(got, []int{3}) {
		t.Errorf("weather: %v", got)
	}
	if got := ix.Top("read my notes file", 2); got[0] != 1 {
		t.Errorf("read file: %v", got)
	}
	// Every document comes back when k is larger; unrelated ones keep
	// their order.
	if got := ix.Top("nothing matches", 10); !slices.Equal(got, []int{0, 1, 2, 3}) {
		t.Errorf("no match: %v", got)
	}
}
