package viewer

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/orchestra-mcp/orchestra/internal/textcut"
	"github.com/orchestra-mcp/orchestra/store"
)

// The viewer's own small inputs, each parsed within a bound: the query
// string as a whole (maxQuery), and each parameter below. RELIABILITY.md
// lists them.
const (
	maxQuery     = 4 << 10 // bytes of a query string
	maxID        = 128     // bytes of an exec id
	maxStepID    = 256     // bytes of a step id
	maxToolName  = 256     // bytes of a tool name
	maxCursor    = 128     // bytes of a list cursor
	maxTimeParam = 40      // bytes of a since or until
	// DefaultPageSize and MaxPageSize are the runs a page of the list
	// shows by default and at most.
	DefaultPageSize = 50
	MaxPageSize     = 200
)

// listQuery is the runs list's query: its filters and page.
type listQuery struct {
	Status string
	Text   string
	Since  string // as given, for the form
	Until  string
	Cursor string
	Limit  int

	since, until time.Time
}

// statuses are the statuses the list filters by.
var statuses = []string{"running", "paused", "success", "failed", "partial", "interrupted", "cancelled"}

// parseList reads the list's query, each parameter within its bound, and
// says what is wrong and how to fix it otherwise.
func parseList(q url.Values) (listQuery, error) {
	lq := listQuery{Status: q.Get("status"), Text: strings.TrimSpace(q.Get("q")), Since: strings.TrimSpace(q.Get("since")),
		Until: strings.TrimSpace(q.Get("until")), Cursor: q.Get("cursor"), Limit: DefaultPageSize}
	if lq.Status != "" && !slices.Contains(statuses, lq.Status) {
		return lq, fmt.Errorf("status %q is not one of %s", clip(lq.Status), strings.Join(statuses, ", "))
	}
	if len(lq.Text) > store.MaxListText || !utf8.ValidString(lq.Text) {
		return lq, fmt.Errorf("the text to search for must be UTF-8 of at most %d bytes; it has %d", store.MaxListText, len(lq.Text))
	}
	if len(lq.Cursor) > maxCursor {
		return lq, fmt.Errorf("the cursor is %d bytes long; follow the list's own \"Older\" link", len(lq.Cursor))
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxPageSize {
			return lq, fmt.Errorf("limit %q must be a number from 1 to %d", clip(s), MaxPageSize)
		}
		lq.Limit = n
	}
	var err error
	if lq.since, err = parseTime("since", lq.Since); err != nil {
		return lq, err
	}
	if lq.until, err = parseTime("until", lq.Until); err != nil {
		return lq, err
	}
	if !lq.since.IsZero() && !lq.until.IsZero() && !lq.until.After(lq.since) {
		return lq, fmt.Errorf("until (%s) must be later than since (%s)", lq.Until, lq.Since)
	}
	return lq, nil
}

// timeLayouts are the forms a since or until may take, all in UTC unless
// they carry a zone: a date, a browser's datetime-local input, RFC 3339.
var timeLayouts = []string{"2006-01-02", "2006-01-02T15:04", "2006-01-02T15:04:05", time.RFC3339Nano}

func parseTime(name, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if len(s) > maxTimeParam {
		return time.Time{}, fmt.Errorf("%s is %d bytes long; give a date such as 2026-01-31 or a time such as 2026-01-31T14:05 (UTC)", name, len(s))
	}
	for _, layout := range timeLayouts {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%s %q is not a date such as 2026-01-31 or a time such as 2026-01-31T14:05 (UTC)", name, clip(s))
}

// options turns the query into the store's list options within scope.
func (lq listQuery) options(scope store.Scope) store.ListOptions {
	return store.ListOptions{Limit: lq.Limit, Cursor: lq.Cursor, Status: store.Status(lq.Status), Scope: scope,
		Text: lq.Text, Since: lq.since, Until: lq.until, Roots: true}
}

// values returns the query's filters as URL values, for the next page's link.
func (lq listQuery) values() url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"status": lq.Status, "q": lq.Text, "since": lq.Since, "until": lq.Until} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if lq.Limit != DefaultPageSize {
		q.Set("limit", strconv.Itoa(lq.Limit))
	}
	return q
}

// checkID checks an exec id or a tool name from a path: printable, with
// no slash, within max bytes.
func checkID(what, s string, max int) error {
	if s == "" || len(s) > max || !utf8.ValidString(s) {
		return fmt.Errorf("the %s must be 1 to %d bytes of UTF-8", what, max)
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == '/' {
			return fmt.Errorf("the %s %q holds a character it cannot have", what, clip(s))
		}
	}
	return nil
}

// clip shortens what is echoed back of a bad value.
func clip(s string) string { return textcut.Truncate(s, 40) }
