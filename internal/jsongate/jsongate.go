package jsongate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Limits bound one JSON document from outside. A zero field sets no bound.
type Limits struct {
	// Bytes caps the document's size.
	Bytes int64
	// Depth caps how deeply arrays and objects nest: [] is one level,
	// [[]] two.
	Depth int
	// Elements caps the values inside the document, counted through it
	// all: each element of an array and each member of an object, and
	// one more for each empty array or object.
	Elements int
}

// Defaults of a document from a client or another program, where nothing
// more specific is configured. The depth is what MCP SDKs parse; the
// element count bounds what decoding materialises (a few dozen bytes a
// value) whatever the byte limit.
const (
	DefaultDepth    = 1000
	DefaultElements = 500_000
)

// Default returns the default limits with a byte limit of bytes.
func Default(bytes int64) Limits {
	return Limits{Bytes: bytes, Depth: DefaultDepth, Elements: DefaultElements}
}

// Kinds of limit an [Error] names.
const (
	KindBytes    = "bytes"
	KindDepth    = "depth"
	KindElements = "elements"
)

// Error says which limit a document passed and where. Its message is a
// predicate ("is larger than the limit of 4194304 bytes"): callers put
// what the document was before it ([Describe]).
type Error struct {
	// Kind is KindBytes, KindDepth or KindElements.
	Kind string
	// Max is the limit that was passed.
	Max int64
	// Offset is the byte at which it was passed.
	Offset int64
}

func (e *Error) Error() string {
	switch e.Kind {
	case KindBytes:
		return fmt.Sprintf("is larger than the limit of %d bytes", e.Max)
	case KindDepth:
		return fmt.Sprintf("is nested deeper than the limit of %d levels (at byte %d)", e.Max, e.Offset)
	default:
		return fmt.Sprintf("holds more than the limit of %d values (at byte %d)", e.Max, e.Offset)
	}
}

// Keys name the settings that raise each limit, for messages.
type Keys struct {
	Bytes, Depth, Elements string
}

// Describe says that what (“the request”, “the message”) passed a limit
// and how to get under it, naming the setting that raises the limit. An
// error that is not the gate's is described as it is.
func Describe(what string, err error, k Keys) string {
	e, ok := AsError(err)
	if !ok {
		return fmt.Sprintf("%s: %v", what, err)
	}
	switch e.Kind {
	case KindDepth:
		return fmt.Sprintf("%s %v: send flatter JSON (%s sets the limit; MCP clients parse no deeper than 1,000 levels)", what, e, k.Depth)
	case KindElements:
		return fmt.Sprintf("%s %v: send fewer values, pass large data by reference (a URL or a step that fetches it), or raise %s in the configuration file", what, e, k.Elements)
	}
	return fmt.Sprintf("%s %v: send less, pass large data by reference, or raise %s in the configuration file", what, e, k.Bytes)
}

// AsError returns the gate's error in err's chain, if any.
func AsError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// Check reports the first limit data passes, as an *[Error]. It does not
// validate: malformed JSON within the limits passes, and the decoder that
// comes next says what is wrong with it.
func (l Limits) Check(data []byte) error {
	if l.Bytes > 0 && int64(len(data)) > l.Bytes {
		return &Error{Kind: KindBytes, Max: l.Bytes, Offset: l.Bytes}
	}
	s := NewScanner(Limits{Depth: l.Depth, Elements: l.Elements})
	_, err := s.Write(data)
	return err
}

// Unmarshal checks data against l, then decodes it into v as
// [json.Unmarshal] does.
func (l Limits) Unmarshal(data []byte, v any) error {
	if err := l.Check(data); err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}

// ReadAll reads r to its end and checks what it read. It stops reading
// once l.Bytes are passed, so an endless source (a pipe, /dev/zero) costs
// at most l.Bytes.
func (l Limits) ReadAll(r io.Reader) ([]byte, error) {
	if l.Bytes > 0 {
		r = io.LimitReader(r, l.Bytes+1)
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	if err := l.Check(data); err != nil {
		return nil, err
	}
	return data, nil
}

// Reader returns a reader of r that fails with an *[Error] as soon as what
// passed through it exceeds a limit; nothing past the limit is read. With
// no depth or element limit it only counts bytes, so it suits text that
// is not JSON too (an event stream).
func (l Limits) Reader(r io.Reader) io.Reader {
	s := NewScanner(l)
	s.bytesOnly = l.Depth <= 0 && l.Elements <= 0
	return &reader{r: r, s: s}
}

type reader struct {
	r   io.Reader
	s   *Scanner
	err error
}

func (r *reader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if max := r.s.lim.Bytes; max > 0 {
		// Read one byte past the limit at most, to tell "exactly at" from
		// "over".
		if room := max + 1 - r.s.n; int64(len(p)) > room {
			p = p[:room]
		}
	}
	n, err := r.r.Read(p)
	if n > 0 {
		if _, serr := r.s.Write(p[:n]); serr != nil {
			r.err = serr
			return 0, serr
		}
	}
	return n, err
}

// Scanner follows a JSON document written to it in pieces, cut anywhere,
// and fails as soon as the document passes a limit. It looks only at
// JSON's structural characters outside strings, so its cost is a pass
// over the bytes with no allocation.
type Scanner struct {
	lim   Limits
	n     int64 // bytes written
	depth int
	elems int
	inStr bool
	esc   bool // inside a string, after a backslash
	err   error

	bytesOnly bool // counts bytes only: a Reader of text that may not be JSON
}

// NewScanner returns a scanner that enforces l.
func NewScanner(l Limits) *Scanner { return &Scanner{lim: l} }

// Depth returns the current nesting depth.
func (s *Scanner) Depth() int { return s.depth }

// Elements returns the values counted so far.
func (s *Scanner) Elements() int { return s.elems }

// Bytes returns the bytes written so far.
func (s *Scanner) Bytes() int64 { return s.n }

// Write scans p. Once a limit is passed it returns an *[Error], and the
// same error from then on.
func (s *Scanner) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	if s.lim.Bytes > 0 && s.n+int64(len(p)) > s.lim.Bytes {
		s.err = &Error{Kind: KindBytes, Max: s.lim.Bytes, Offset: s.lim.Bytes}
		return 0, s.err
	}
	if s.bytesOnly {
		s.n += int64(len(p))
		return len(p), nil
	}
	base := s.n
	i := 0
	for i < len(p) {
		if s.inStr {
			if s.esc {
				s.esc = false
				i++
				continue
			}
			// Jump to the next quote; a backslash before it escapes
			// something, maybe that quote.
			q := bytes.IndexByte(p[i:], '"')
			if q < 0 {
				q = len(p) - i
			}
			if b := bytes.IndexByte(p[i:i+q], '\\'); b >= 0 {
				i += b + 1
				s.esc = true
				continue
			}
			i += q
			if i < len(p) {
				s.inStr = false
				i++
			}
			continue
		}
		switch p[i] {
		case '"':
			s.inStr = true
		case '[', '{':
			s.depth++
			s.elems++
			if s.lim.Depth > 0 && s.depth > s.lim.Depth {
				s.err = &Error{Kind: KindDepth, Max: int64(s.lim.Depth), Offset: base + int64(i)}
			}
		case ']', '}':
			if s.depth > 0 {
				s.depth--
			}
		case ',':
			s.elems++
		default:
			i++
			continue
		}
		if s.lim.Elements > 0 && s.elems > s.lim.Elements && s.err == nil {
			s.err = &Error{Kind: KindElements, Max: int64(s.lim.Elements), Offset: base + int64(i)}
		}
		if s.err != nil {
			s.n = base + int64(i)
			return i, s.err
		}
		i++
	}
	s.n = base + int64(len(p))
	return len(p), nil
}
