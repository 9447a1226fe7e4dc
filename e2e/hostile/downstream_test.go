package hostile

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

// hostileTools are the tools the hostile downstream server lists, with
// their schemas: each of them hostile to the schema loader but one.
func hostileTools() string {
	tools := []string{
		`{"name":"result","description":"Answers as its shape says.","inputSchema":{"type":"object","properties":{"shape":{"type":"string"}}}}`,
		`{"name":"cyclic_input","description":"Its input schema refers to itself.","inputSchema":{"type":"object","$ref":"#"}}`,
		`{"name":"cyclic_output","description":"Its output schema is a $defs cycle.","inputSchema":{"type":"object"},"outputSchema":{"type":"object","$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"properties":{"v":{"$ref":"#/$defs/a"}}}}`,
		`{"name":"deep_schema","description":"Its input schema nests 900 deep.","inputSchema":{"type":"object","properties":{"a":` + strings.Repeat(`{"type":"object","properties":{"a":`, 450) + `{}` + strings.Repeat(`}}`, 450) + `}}}`,
		`{"name":"huge_schema","description":"Its input schema is 2 MB.","inputSchema":{"type":"object","properties":{"a":{"enum":[` + strings.TrimSuffix(strings.Repeat(`"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",`, 64<<10), ",") + `]}}}}`,
		`{"name":"wide_schema","description":"Its input schema inlines to 2^24 schemas.","inputSchema":` + schemaDoubling(24) + `}`,
		`{"name":"malformed_schema","description":"Its input schema is not one.","inputSchema":{"type":"object","properties":{"a":{"type":5,"pattern":"(?<=x)"}}}}`,
		`{"name":"wrong_type_schema","description":"Its input schema is a string.","inputSchema":"object"}`,
		`{"name":"exponential","description":"Its output schema costs 2^depth to check.","inputSchema":{"type":"object"},"outputSchema":` + exponentialSchema + `}`,
	}
	return `{"tools":[` + strings.Join(tools, ",") + `]}`
}

// serveDownstream is a raw stdio MCP server that answers as hostile
// servers do: the matrix's downstream entry points.
func serveDownstream(in io.Reader, out io.Writer) error {
	w := bufio.NewWriterSize(out, 1<<20)
	send := func(s string) {
		w.WriteString(s)
		w.WriteByte('\n')
		w.Flush()
	}
	r := bufio.NewReaderSize(in, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return nil
		}
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				ProtocolVersion string `json:"protocolVersion"`
				Name            string `json:"name"`
				Arguments       struct {
					Shape string `json:"shape"`
				} `json:"arguments"`
			} `json:"params"`
		}
		if json.Unmarshal(line, &req) != nil || len(req.ID) == 0 {
			continue
		}
		result := func(res string) { send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, req.ID, res)) }
		switch req.Method {
		case "initialize":
			result(fmt.Sprintf(`{"protocolVersion":%q,"capabilities":{"tools":{}},"serverInfo":{"name":"hostile","version":"1"}}`, req.Params.ProtocolVersion))
		case "tools/list":
			result(hostileTools())
		case "tools/call":
			if req.Params.Name == "exponential" {
				result(`{"content":[],"structuredContent":{"v":` + exponentialValue(40) + `}}`)
				continue
			}
			if req.Params.Name != "result" {
				result(`{"content":[{"type":"text","text":"ok"}]}`)
				continue
			}
			switch shape(req.Params.Arguments.Shape) {
			case huge:
				result(`{"content":[{"type":"text","text":` + bigString(50<<20) + `}]}`)
			case deep:
				result(`{"content":[],"structuredContent":{"v":` + deepArrays(5000, "1") + `}}`)
			case wide:
				result(`{"content":[],"structuredContent":{"v":` + zeros(3_500_000) + `}}`)
			case malformed:
				send("this is not a JSON-RPC message")
			case endless:
				// A line that ends only after a gigabyte.
				fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"`, req.ID)
				chunk := strings.Repeat("x", 1<<20)
				for range 1 << 10 {
					if _, err := w.WriteString(chunk); err != nil {
						return err
					}
				}
				send(`"}]}}`)
			case slow:
				// Never answered.
			case wrongType:
				result(`"a result that is a string"`)
			default:
				result(`{"content":[{"type":"text","text":"ok"}]}`)
			}
		default:
			send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"no such method"}}`, req.ID))
		}
	}
}

// downstreamMain runs the hostile downstream server on stdin and stdout.
func downstreamMain() int {
	if err := serveDownstream(os.Stdin, os.Stdout); err != nil {
		return 1
	}
	return 0
}
