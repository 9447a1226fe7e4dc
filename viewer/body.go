package viewer

import (
	"bytes"
	"encoding/json"

	"github.com/orchestra-mcp/orchestra/internal/textcut"
)

// Large bodies are cut for the page, with a link to the whole.
const (
	stepBodyLimit = 32 << 10 // bytes of a step's arguments, output or error shown
	runBodyLimit  = 64 << 10 // bytes of a run's plan or envelope shown
	maxIndent     = 1 << 20  // bodies larger than this are shown as stored, not indented
)

// body is a JSON value as the page shows it.
type body struct {
	// Text is what is shown: the value indented, or a text output's text.
	Text string
	// IsText says Text is a tool's text output ({"text": "..."}), not JSON.
	IsText bool
	// Cut says Text is the beginning only; Size is the whole's, in bytes.
	Cut  bool
	Size int
	// Whole is the URL of the whole value.
	Whole string
}

// jsonBody makes the shown form of raw, cut to limit bytes.
func jsonBody(raw json.RawMessage, limit int, whole string) *body {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	b := &body{Size: len(raw), Whole: whole}
	var text struct {
		Text *string `json:"text"`
	}
	var fields map[string]json.RawMessage
	if len(raw) <= maxIndent && raw[0] == '{' && json.Unmarshal(raw, &fields) == nil && len(fields) == 1 &&
		json.Unmarshal(raw, &text) == nil && text.Text != nil {
		b.Text, b.IsText = *text.Text, true
	} else if len(raw) <= maxIndent {
		var buf bytes.Buffer
		if json.Indent(&buf, raw, "", "  ") == nil {
			b.Text = buf.String()
		} else {
			b.Text = string(raw)
		}
	} else {
		b.Text = string(raw[:textcut.Index(raw, limit)])
		b.Cut = true
		return b
	}
	if len(b.Text) > limit {
		b.Text, b.Cut = b.Text[:textcut.Index(b.Text, limit)], true
	}
	return b
}
