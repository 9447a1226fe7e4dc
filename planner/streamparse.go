package planner

import (
	"bytes"
	"encoding/json"
)

// planScanner follows the argument text of the planning call as a model
// streams it, without waiting for its end: it reports each element of the
// plan's "calls" (or "steps") array once the element's text is complete,
// and keeps the other top-level values once theirs are. It looks at
// bytes only for JSON's structural characters, which never occur inside a
// UTF-8 sequence, so the text may be cut anywhere.
//
// It does not validate: an element it reports may still be invalid JSON
// when the text is (the decoder says so). On text that is not a JSON
// object it stops reporting anything.
type planScanner struct {
	buf []byte
	pos int // bytes of buf scanned

	depth   int
	inStr   bool
	esc     bool
	bad     bool // not an object, or unbalanced: nothing more is reported
	ended   bool // the top-level object closed
	wantKey bool // at depth 1, the next string is a key

	keyStart int    // where the current top-level key's string began
	key      string // the top-level key whose value is being read
	valStart int    // where the current top-level value began; -1 before it
	inArray  bool   // inside the array of calls or steps, at depth 2
	elStart  int    // where the current element of that array began; -1 between

	elems   []json.RawMessage          // the complete elements, in order
	decoded []any                      // the first elements, decoded (by partialPlan)
	values  map[string]json.RawMessage // the complete top-level values
}

func newPlanScanner() *planScanner {
	return &planScanner{valStart: -1, elStart: -1, values: map[string]json.RawMessage{}}
}

// isPlanArray reports whether a top-level key holds the steps.
func isPlanArray(key string) bool { return key == "calls" || key == "steps" }

// write adds the next piece of text and reports whether a new element or
// top-level value is complete.
func (p *planScanner) write(piece string) bool {
	if p.bad || p.ended {
		return false
	}
	p.buf = append(p.buf, piece...)
	before, vals := len(p.elems), len(p.values)
	for ; p.pos < len(p.buf) && !p.bad && !p.ended; p.pos++ {
		p.step(p.buf[p.pos])
	}
	return len(p.elems) > before || len(p.values) > vals
}

func (p *planScanner) step(c byte) {
	i := p.pos
	if p.inStr {
		switch {
		case p.esc:
			p.esc = false
		case c == '\\':
			p.esc = true
		case c == '"':
			p.inStr = false
			if p.depth == 1 && p.wantKey {
				var k string
				if json.Unmarshal(p.buf[p.keyStart:i+1], &k) != nil {
					p.bad = true
					return
				}
				p.key, p.wantKey = k, false
			}
		}
		return
	}
	switch c {
	case ' ', '\t', '\n', '\r':
		return
	}
	if p.depth == 0 {
		if c != '{' {
			p.bad = true
			return
		}
		p.depth, p.wantKey = 1, true
		return
	}
	if p.depth == 1 && !p.wantKey && p.valStart < 0 && c != ':' {
		p.valStart = i
	}
	if p.depth == 2 && p.inArray && p.elStart < 0 && c != ',' && c != ']' {
		p.elStart = i
	}
	switch c {
	case '"':
		p.inStr = true
		if p.depth == 1 && p.wantKey {
			p.keyStart = i
		}
	case '{', '[':
		p.depth++
		if p.depth == 2 && c == '[' && isPlanArray(p.key) && p.valStart == i {
			p.inArray = true
		}
	case '}', ']':
		switch {
		case p.depth == 3 && p.inArray && p.elStart >= 0:
			p.elems = append(p.elems, json.RawMessage(bytes.Clone(p.buf[p.elStart:i+1])))
			p.elStart = -1
		case p.depth == 2 && p.inArray && p.elStart >= 0: // a scalar last element
			p.elems = append(p.elems, json.RawMessage(bytes.Clone(bytes.TrimSpace(p.buf[p.elStart:i]))))
			p.elStart = -1
		}
		p.depth--
		switch {
		case p.depth == 1 && p.inArray:
			p.inArray = false
		case p.depth == 0:
			p.endValue(i)
			p.ended = true
		}
	case ',':
		switch {
		case p.depth == 1:
			p.endValue(i)
			p.wantKey = true
		case p.depth == 2 && p.inArray && p.elStart >= 0:
			// A scalar element: complete (and invalid as a step).
			p.elems = append(p.elems, json.RawMessage(bytes.Clone(bytes.TrimSpace(p.buf[p.elStart:i]))))
			p.elStart = -1
		}
	}
}

// endValue ends the current top-level value at offset i (its ',' or the
// object's '}').
func (p *planScanner) endValue(i int) {
	if p.valStart < 0 || p.key == "" {
		p.valStart = -1
		return
	}
	p.values[p.key] = json.RawMessage(bytes.Clone(bytes.TrimSpace(p.buf[p.valStart:i])))
	p.valStart, p.key = -1, ""
}

// document returns the plan written so far: the complete top-level values
// and the complete elements of the steps, as a JSON object.
func (p *planScanner) document() json.RawMessage {
	doc := map[string]json.RawMessage{}
	arrayKey := "calls"
	for k, v := range p.values {
		if isPlanArray(k) {
			arrayKey = k
			continue
		}
		doc[k] = v
	}
	if p.inArray && isPlanArray(p.key) {
		arrayKey = p.key
	}
	elems, _ := json.Marshal(p.elems)
	if len(p.elems) == 0 {
		elems = []byte("[]")
	}
	doc[arrayKey] = elems
	data, _ := json.Marshal(doc)
	return data
}
