package planner

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// elementsOf returns the elements of doc's calls or steps as the standard
// decoder reads them, compacted.
func elementsOf(doc []byte) ([]string, bool) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(doc, &obj) != nil {
		return nil, false
	}
	var out []string
	for _, k := range []string{"calls", "steps"} {
		var elems []json.RawMessage
		if raw, ok := obj[k]; ok && json.Unmarshal(raw, &elems) == nil {
			for _, e := range elems {
				var b bytes.Buffer
				_ = json.Compact(&b, e)
				out = append(out, b.String())
			}
			return out, true
		}
	}
	return nil, false
}

// scanPieces feeds doc to a scanner cut at each offset of cuts (taken
// modulo its length), and returns the elements it reported, compacted.
func scanPieces(doc []byte, cuts []byte) []string {
	sc := newPlanScanner()
	last := 0
	for _, c := range cuts {
		if len(doc) == 0 {
			break
		}
		at := last + int(c)%(len(doc)-last+1)
		sc.write(string(doc[last:at]))
		last = at
	}
	sc.write(string(doc[last:]))
	var out []string
	for _, e := range sc.elems {
		var b bytes.Buffer
		if json.Compact(&b, e) != nil {
			out = append(out, string(e))
			continue
		}
		out = append(out, b.String())
	}
	return out
}

var scannerSeeds = []string{
	`{"type":"tool_calls","calls":[{"tool_name":"a","arguments":{"x":"caf\u00e9 \"q\" \\ 日本語 🎵"}},{"tool_name":"b","arguments":{"l":[1,[2,{"m":null}]],"o":{}}}]}`,
	`{"steps":[{"id":"s1","tool":"t","arguments":{"k":"}]"}},{"id":"g","parallel":[{"tool":"t"},{"tool":"u"}]}],"answer":"${s1.output}"}`,
	`{"answer":"a, b ] } {","calls":[{"tool_name":"x","arguments":{}}],"flow":null,"type":"tool_calls"}`,
	` { "calls" : [ { "tool_name" : "x" } , { "tool_name" : "y" } ] } `,
	`{"calls":[1,"two",true,null]}`,
	`{"calls":[{"tool_name":"x"`,
	`{"calls":[{"a":"\\"}, {"b":"\"}"}]}`,
	`["not an object"]`,
	`{"ca\u006cls":[{"tool_name":"escaped key"}]}`,
	`garbage {"calls":[]}`,
	`{"calls":[{]}`,
	"{\"calls\":[{\"x\":\"\xe6\x97\xa5\"}]}",
}

// The scanner reports the same elements however the text is cut: at
// every byte (UTF-8 sequences cut in half) and in one piece.
func TestPlanScannerPieces(t *testing.T) {
	for _, doc := range scannerSeeds {
		whole := scanPieces([]byte(doc), nil)
		ones := make([]byte, len(doc))
		for i := range ones {
			ones[i] = 1
		}
		if got := scanPieces([]byte(doc), ones); !equalStrings(got, whole) {
			t.Errorf("%s: byte by byte %q, whole %q", doc, got, whole)
		}
		if want, ok := elementsOf([]byte(doc)); ok && !equalStrings(whole, want) {
			t.Errorf("%s: elements %q, want %q", doc, whole, want)
		}
	}
}

// The plan so far holds the complete elements only, and top-level values
// once complete.
func TestPlanScannerPartial(t *testing.T) {
	sc := newPlanScanner()
	sc.write(`{"reasoning":"r, [x]","calls":[{"tool_name":"a","arguments":{"k":"v"}},{"tool_name":"b","argu`)
	if len(sc.elems) != 1 || string(sc.values["reasoning"]) != `"r, [x]"` {
		t.Fatalf("elements %q values %q", sc.elems, sc.values)
	}
	if !sc.write(`ments":{}}],"type":"tool_calls"}`) || len(sc.elems) != 2 || string(sc.values["type"]) != `"tool_calls"` || !sc.ended {
		t.Fatalf("elements %q values %q", sc.elems, sc.values)
	}
	if sc.write(`{"calls":[{}]}`) || len(sc.elems) != 2 {
		t.Errorf("text after the object's end was read")
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// FuzzPlanScanner: on any text cut anywhere the scanner does not panic,
// reports the same elements as on the whole text, and on a valid plan
// exactly the elements the standard decoder reads.
func FuzzPlanScanner(f *testing.F) {
	for i, s := range scannerSeeds {
		f.Add([]byte(s), []byte{byte(i), 3, 7, 1})
	}
	f.Fuzz(func(t *testing.T, doc, cuts []byte) {
		whole := scanPieces(doc, nil)
		got := scanPieces(doc, cuts)
		if !equalStrings(got, whole) {
			t.Fatalf("cut at %v: %q, whole: %q", cuts, got, whole)
		}
		if !utf8.Valid(doc) || bytes.Count(doc, []byte(`"calls"`))+bytes.Count(doc, []byte(`"steps"`)) > 1 {
			return // the decoder keeps the last of duplicate keys; the plan's validation decides
		}
		if want, ok := elementsOf(doc); ok && !equalStrings(whole, want) {
			t.Fatalf("elements %q, want %q", whole, want)
		}
	})
}
