package hostile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// shape is a generic kind of hostile input.
type shape string

// The shapes every entry point is tried with.
const (
	huge      shape = "huge"       // more bytes than the entry point's limit
	deep      shape = "deep"       // nested past the depth limit
	wide      shape = "wide"       // more values than the element limit, within the bytes
	cyclic    shape = "cyclic"     // refers to itself (schemas, plans)
	slow      shape = "slow"       // arrives, or answers, slower than its deadline
	endless   shape = "endless"    // never ends
	malformed shape = "malformed"  // not what its format says it is
	wrongType shape = "wrong type" // valid, of the wrong JSON type
)

// shapes are the shapes in the order the report lists them.
var shapes = []shape{huge, deep, wide, cyclic, slow, endless, malformed, wrongType}

// deepArrays is n nested arrays around v.
func deepArrays(n int, v string) string {
	return strings.Repeat("[", n) + v + strings.Repeat("]", n)
}

// zeros is a JSON array of n zeros: 2 bytes a value.
func zeros(n int) string {
	var b bytes.Buffer
	b.Grow(2*n + 2)
	b.WriteByte('[')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('0')
	}
	b.WriteByte(']')
	return b.String()
}

// bigString is a JSON string of n bytes.
func bigString(n int) string { return `"` + strings.Repeat("x", n) + `"` }

// mustJSON encodes v.
func mustJSON(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(data)
}

// modernMeta is the _meta a request of protocol 2026-07-28 carries, which
// a stateless HTTP request needs.
const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"hostile","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`

// modern adds modernMeta to a JSON-RPC request's params, for HTTP.
func modern(line string) string {
	if i := strings.Index(line, `"params":{`); i >= 0 {
		i += len(`"params":{`)
		sep := ","
		if strings.HasPrefix(line[i:], "}") {
			sep = ""
		}
		return line[:i] + modernMeta + sep + line[i:]
	}
	if strings.Contains(line, `"params":`) || !strings.HasSuffix(line, "}") {
		return line
	}
	return line[:len(line)-1] + `,"params":{` + modernMeta + `}}`
}

// exponentialValue is a value n deep in the member exponentialSchema
// applies two parts to.
func exponentialValue(n int) string {
	return strings.Repeat(`{"x":`, n) + "1" + strings.Repeat("}", n)
}

// callLine is a tools/call of agent_orchestrate with arguments args (raw
// JSON), as one JSON-RPC message.
func callLine(id int, args string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"agent_orchestrate","arguments":%s}}`, id, args)
}

// schemaDoubling is a schema of levels definitions, each naming the next
// twice under properties: small, but 2^levels schemas when inlined.
func schemaDoubling(levels int) string {
	var b strings.Builder
	b.WriteString(`{"type":"object","$defs":{`)
	for i := range levels {
		fmt.Fprintf(&b, `"a%d":{"type":"object","properties":{"x":{"$ref":"#/$defs/a%d"},"y":{"$ref":"#/$defs/a%d"}}},`, i, i+1, i+1)
	}
	fmt.Fprintf(&b, `"a%d":{"type":"string"}},"properties":{"v":{"$ref":"#/$defs/a0"}}}`, levels)
	return b.String()
}

// exponentialSchema applies two of its parts to the same member at every
// level: checking a value n deep against it takes 2^n evaluations.
const exponentialSchema = `{"type":"object","$defs":{"a":{"allOf":[{"properties":{"x":{"$ref":"#/$defs/a"}}},{"properties":{"x":{"$ref":"#/$defs/a"}}}]}},"properties":{"v":{"$ref":"#/$defs/a"}}}`
