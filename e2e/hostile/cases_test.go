package hostile

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// entry is one row of RELIABILITY.md's inventory of entry points: where
// bytes, JSON, schemas, names or streams enter orchestra.
type entry struct {
	// id names the entry point in the inventory's matrix column.
	id string
	// what says what enters there.
	what string
	// via is how its cases are sent: "request" (a JSON-RPC message to a
	// serving orchestra, over stdio and HTTP), "http" (over HTTP only),
	// "cli" (an orchestra command run with a hostile file) or "process"
	// (an orchestra serve started with hostile surroundings).
	via string
	// na says, for each shape that does not apply, why.
	na map[shape]string
}

// hcase is one hostile input at one entry point.
type hcase struct {
	entry string
	shape shape
	label string // tells two cases of one entry and shape apart

	// A request case is a JSON-RPC message: line, or what stdin and body
	// write for the shapes a line cannot carry (slow, endless); args, when
	// set, makes line a tools/call of agent_orchestrate.
	args  func() string
	line  func(id int) string
	stdin func(id int) io.Reader
	body  func() io.Reader
	setup func(h *harness, t transport) (map[string]string, error) // values for args' {{NAME}}
	// Other cases run themselves.
	run func(h *harness) outcome
	// before sets the fakes' modes; after puts them back.
	before func(h *harness)

	want    []string // acceptable answers: codes, "success"
	hint    string   // the answer's message must contain it
	timeout time.Duration
}

func (c hcase) name() string {
	n := c.entry + "/" + string(c.shape)
	if c.label != "" {
		n += " (" + c.label + ")"
	}
	return n
}

// entries are the inventory's entry points, in its order.
var entries = []entry{
	{id: "message", what: "a JSON-RPC message: a stdio line or an HTTP body, any method, _meta included", via: "request",
		na: map[shape]string{cyclic: "JSON text cannot refer to itself; cycles arrive as plans and schemas (their rows)"}},
	{id: "arguments", what: "the arguments of agent_orchestrate", via: "request",
		na: map[shape]string{
			huge: "the message's limits are its arguments' (message/huge)", deep: "the message's (message/deep)", wide: "the message's (message/wide)",
			cyclic: "JSON text cannot refer to itself", slow: "the message's (message/slow)", endless: "the message's (message/endless)"}},
	{id: "plan", what: "a plan: its steps, groups, loops, templates", via: "request",
		na: map[shape]string{slow: "a plan is checked before anything runs; its steps' deadlines are the downstream and model rows'", endless: "the message's (message/endless)"}},
	{id: "plan.string", what: "a plan sent as a JSON string, decoded again", via: "request",
		na: map[shape]string{slow: "decoded at once from the message", endless: "the message's (message/endless)"}},
	{id: "bindings", what: "bindings: values templates reference", via: "request",
		na: map[shape]string{cyclic: "values are not resolved; a template cannot name a binding from a binding", slow: "the message's", endless: "the message's"}},
	{id: "context", what: "context: instructions, history, facts for the planner", via: "request",
		na: map[shape]string{cyclic: "values, not resolved", slow: "the message's", endless: "the message's"}},
	{id: "client_tools", what: "client tools: names, input and output schemas", via: "request",
		na: map[shape]string{slow: "the message's", endless: "the message's"}},
	{id: "resume", what: "resume: a paused run's exec id and its calls' results", via: "request",
		na: map[shape]string{slow: "a paused run waits at most limits.pause_ttl", endless: "the message's"}},
	{id: "resources", what: "resources/read: a record's URI, a page's cursor", via: "request",
		na: map[shape]string{deep: "a URI is a string", wide: "a URI is a string", cyclic: "a URI is a string", slow: "the message's", endless: "the message's"}},
	{id: "auth", what: "the Authorization header: static tokens and JWTs", via: "http",
		na: map[shape]string{deep: "a header is a string", cyclic: "a header is a string", slow: "net/http's server.header_timeout (TestHTTPHeaderTimeout)", endless: "net/http's header limit (huge)"}},
	{id: "jwks", what: "the JWT issuer's key set, fetched from jwks_url", via: "process",
		na: map[shape]string{cyclic: "a key set has no references"}},
	{id: "config", what: "the configuration file (--config, ORCHESTRA_CONFIG)", via: "cli",
		na: map[shape]string{slow: "read once at start from a file the operator names"}},
	{id: "cli.plan", what: "the plan file of orchestra run and validate (or stdin)", via: "cli",
		na: map[shape]string{slow: "read once, from a file or stdin the user gives"}},
	{id: "cli.results", what: "the --results file of orchestra resume", via: "cli",
		na: map[shape]string{cyclic: "values, not resolved", slow: "read once, from a file the user gives"}},
	{id: "cli.context", what: "the --context file of orchestra ask", via: "cli",
		na: map[shape]string{cyclic: "values, not resolved", slow: "read once, from a file the user gives"}},
	{id: "downstream.tools", what: "a downstream server's tools/list: names and input and output schemas", via: "request",
		na: map[shape]string{slow: "listing is bounded by the connection's own timeouts at start", endless: "the downstream message's limit (downstream.result/endless)"}},
	{id: "downstream.result", what: "a downstream server's answer to tools/call", via: "request"},
	{id: "model.planner", what: "the planner model's answer: streamed text and arguments, or one body", via: "request",
		na: map[shape]string{cyclic: "an answer is text; the plan it holds is the plan row's"}},
	{id: "model.agent", what: "an agent's model answer, through the same providers", via: "request",
		na: map[shape]string{deep: "the planner's (model.planner/deep): one provider reads both", wide: "model.planner/wide", cyclic: "an answer is text", wrongType: "model.planner/wrong type"}},
}

// plainPlan is a small plan that succeeds.
const plainPlan = `{"plan":{"steps":[{"id":"a","tool":"json_query","arguments":{"query":".x","input":{"x":1}}}]}}`

// steps returns n copies of step as a JSON array.
func steps(n int, step string) string {
	return "[" + strings.TrimSuffix(strings.Repeat(step+",", n), ",") + "]"
}

// nestedGroups is a plan of groups nested n deep.
func nestedGroups(n int) string {
	s := `{"tool":"json_query","arguments":{"query":".","input":1}}`
	for range n {
		s = `{"parallel":[` + s + `]}`
	}
	return `{"plan":{"steps":[` + s + `]}}`
}

// slowReader writes head, then waits d, then tail.
func slowReader(head string, d time.Duration, tail string) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		io.WriteString(pw, head)
		time.Sleep(d)
		io.WriteString(pw, tail)
		pw.Close()
	}()
	return pr
}

// endlessReader writes head, then piece for ever (or until n bytes, then
// tail: practically endless for a line).
type endlessReader struct {
	head, piece, tail string
	left              int64
	pos               int
}

func (r *endlessReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		switch {
		case r.head != "":
			k := copy(p[n:], r.head)
			r.head = r.head[k:]
			n += k
		case r.left != 0:
			k := copy(p[n:], r.piece[r.pos:])
			r.pos = (r.pos + k) % len(r.piece)
			if r.left > 0 {
				r.left -= int64(k)
				if r.left < 0 {
					r.left = 0
				}
			}
			n += k
		case r.tail != "":
			k := copy(p[n:], r.tail)
			r.tail = r.tail[k:]
			n += k
		default:
			if n == 0 {
				return 0, io.EOF
			}
			return n, nil
		}
	}
	return n, nil
}

// requestCases are the cases sent as messages to a serving orchestra.
func requestCases() []hcase {
	big := func(n int) string { return bigString(n) }
	return []hcase{
		// message
		{entry: "message", shape: huge, line: func(id int) string {
			return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping","params":{"pad":%s}}`, id, big(6<<20))
		}, want: []string{"jsonrpc:-32600", "http:413"}, hint: "max_request_bytes"},
		{entry: "message", shape: deep, line: func(id int) string { return callLine(id, `{"plan":`+deepArrays(100_000, "")+`}`) },
			want: []string{"jsonrpc:-32600"}, hint: "max_request_depth"},
		{entry: "message", shape: deep, label: "_meta", line: func(id int) string {
			return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"agent_orchestrate","arguments":%s,"_meta":{"x":%s}}}`, id, plainPlan, deepArrays(1500, ""))
		}, want: []string{"jsonrpc:-32600"}, hint: "max_request_depth"},
		{entry: "message", shape: wide, line: func(id int) string {
			return callLine(id, `{"plan":{"steps":[{"tool":"json_query","arguments":{"query":".","input":1}}]},"bindings":{"z":`+zeros(600_000)+`}}`)
		}, want: []string{"jsonrpc:-32600"}, hint: "max_request_elements"},
		{entry: "message", shape: slow, body: func() io.Reader { return slowReader(`{"jsonrpc":"2.0","id":1,"method":"pi`, 3*time.Second, `ng"}`) },
			stdin: func(id int) io.Reader {
				return slowReader(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"pi`, id), 3*time.Second, "ng\"}\n")
			}, want: []string{"http:408", "success"}, hint: ""},
		{entry: "message", shape: endless, body: func() io.Reader {
			return &endlessReader{head: `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"`, piece: strings.Repeat("x", 64<<10), left: -1}
		}, stdin: func(id int) io.Reader {
			return &endlessReader{head: fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping","params":{"pad":"`, id), piece: strings.Repeat("x", 64<<10), left: 256 << 20, tail: "\"}}\n"}
		}, want: []string{"jsonrpc:-32600", "http:413"}, hint: "max_request_bytes", timeout: 2 * time.Minute},
		{entry: "message", shape: malformed, line: func(id int) string {
			return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":`, id)
		}, want: []string{"jsonrpc:-32700", "http:400"}},
		{entry: "message", shape: wrongType, line: func(id int) string {
			return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":[1,2]}`, id)
		}, want: []string{"jsonrpc:"}},

		// arguments
		{entry: "arguments", shape: malformed, args: func() string { return `"{\"plan\": {\"steps\": ["` }, want: []string{"invalid_request", "jsonrpc:-32602"}},
		{entry: "arguments", shape: wrongType, args: func() string { return `42` }, want: []string{"invalid_request", "jsonrpc:-32602"}},

		// plan
		{entry: "plan", shape: huge, args: func() string {
			return `{"plan":{"steps":` + steps(200_000, `{"tool":"t"}`) + `}}`
		}, want: []string{"too_many_steps"}},
		{entry: "plan", shape: deep, args: func() string { return nestedGroups(450) }, want: []string{"too_deep"}},
		{entry: "plan", shape: wide, args: func() string {
			return `{"plan":{"steps":[{"parallel":` + steps(100_000, `{"tool":"t"}`) + `}]}}`
		}, want: []string{"too_many_steps"}},
		{entry: "plan", shape: cyclic, args: func() string {
			return `{"plan":{"steps":[{"id":"a","tool":"json_query","arguments":{"query":".","input":"$b.output"}},{"id":"b","tool":"json_query","arguments":{"query":".","input":"$a.output"}}],"schedule":"dag"}}`
		}, want: []string{"forward_ref"}},
		{entry: "plan", shape: malformed, args: func() string {
			return `{"plan":{"steps":[{"tool":"render","arguments":{"template":"${0.output"}}]}}`
		}, want: []string{"bad_template", "invalid_arguments", "unknown_ref"}},
		{entry: "plan", shape: wrongType, args: func() string { return `{"plan":{"steps":"all of them"}}` }, want: []string{"invalid_value"}},

		// plan.string
		{entry: "plan.string", shape: huge, args: func() string {
			return `{"plan":` + mustJSON(`{"steps":`+steps(150_000, `{"tool":"t"}`)+`}`) + `}`
		}, want: []string{"too_many_steps"}},
		{entry: "plan.string", shape: deep, args: func() string { return `{"plan":` + mustJSON(deepArrays(9000, "")) + `}` },
			want: []string{"invalid_value"}, hint: "max_request_depth"},
		{entry: "plan.string", shape: wide, args: func() string { return `{"plan":` + mustJSON(`{"steps":[],"return":`+zeros(600_000)+`}`) + `}` },
			want: []string{"invalid_value"}, hint: "max_request_elements"},
		{entry: "plan.string", shape: cyclic, args: func() string {
			return `{"plan":` + mustJSON(`{"steps":[{"id":"a","tool":"json_query","arguments":{"query":".","input":"$a.output"}}]}`) + `}`
		}, want: []string{"self_ref"}},
		{entry: "plan.string", shape: malformed, args: func() string { return `{"plan":"{\"steps\": [{"}` }, want: []string{"invalid_value"}, hint: "not valid JSON"},
		{entry: "plan.string", shape: wrongType, args: func() string { return `{"plan":"42"}` }, want: []string{"invalid_value"}},

		// bindings (within the limits: bounded work, answered)
		{entry: "bindings", shape: huge, args: func() string {
			return `{"plan":{"steps":[{"tool":"json_query","arguments":{"query":"length","input":"$bindings.s"}}]},"bindings":{"s":` + big(3<<20) + `}}`
		}, want: []string{"success"}},
		{entry: "bindings", shape: deep, args: func() string {
			return `{"plan":{"steps":[{"tool":"json_query","arguments":{"query":"[paths]|length","input":"$bindings.d"}}]},"bindings":{"d":` + deepArrays(990, "1") + `}}`
		}, want: []string{"success"}},
		{entry: "bindings", shape: wide, args: func() string {
			return `{"plan":{"steps":[{"tool":"json_query","arguments":{"query":"length","input":"$bindings.z"}}]},"bindings":{"z":` + zeros(450_000) + `}}`
		}, want: []string{"success"}},
		{entry: "bindings", shape: malformed, args: func() string {
			return `{"plan":{"steps":[{"tool":"json_query","arguments":{"query":".","input":1}}]},"bindings":{"a.b":1}}`
		},
			want: []string{"invalid_id"}},
		{entry: "bindings", shape: wrongType, args: func() string {
			return `{"plan":{"steps":[{"tool":"json_query","arguments":{"query":".","input":1}}]},"bindings":[1,2]}`
		},
			want: []string{"invalid_value"}},

		// context
		{entry: "context", shape: huge, args: func() string {
			return `{"plan":{"steps":[{"tool":"json_query","arguments":{"query":".","input":1}}]},"context":{"instructions":` + big(3<<20) + `}}`
		}, want: []string{"success"}},
		{entry: "context", shape: deep, args: func() string {
			return `{"plan":{"steps":[{"tool":"json_query","arguments":{"query":".","input":1}}]},"context":{"facts":{"d":` + deepArrays(990, "1") + `}}}`
		}, want: []string{"success"}},
		{entry: "context", shape: wide, label: "100,000 invalid turns", args: func() string {
			return `{"prompt":"go","context":{"history":` + steps(100_000, `{"role":"robot","content":1}`) + `}}`
		}, want: []string{"invalid_value", "too_many_issues"}},
		{entry: "context", shape: malformed, args: func() string {
			return `{"prompt":"go","context":{"history":[{"role":"user","content":{"text":"hi"}}]}}`
		},
			want: []string{"invalid_value"}},
		{entry: "context", shape: wrongType, args: func() string { return `{"prompt":"go","context":{"history":"yesterday"}}` }, want: []string{"invalid_value"}},

		// client_tools
		{entry: "client_tools", shape: huge, args: func() string {
			return `{"plan":{"steps":[{"tool":"ct","arguments":{}}]},"client_tools":[{"name":"ct","input_schema":{"type":"object","properties":{"a":{"enum":` + steps(80_000, `"xxxxxxxxxxxx"`) + `}}}}]}`
		}, want: []string{"invalid_value"}, hint: "larger than the limit"},
		{entry: "client_tools", shape: deep, args: func() string {
			return `{"plan":{"steps":[{"tool":"ct","arguments":{}}]},"client_tools":[{"name":"ct","input_schema":` + strings.Repeat(`{"type":"object","properties":{"a":`, 150) + `{}` + strings.Repeat(`}}`, 150) + `}]}`
		}, want: []string{"invalid_value"}, hint: "nested deeper"},
		{entry: "client_tools", shape: wide, args: func() string {
			tools := make([]string, 5000)
			for i := range tools {
				tools[i] = fmt.Sprintf(`{"name":"t%d"}`, i)
			}
			return `{"plan":{"steps":[{"tool":"t1","arguments":{}}]},"client_tools":[` + strings.Join(tools, ",") + `]}`
		}, want: []string{"invalid_value"}, hint: "at most 256"},
		{entry: "client_tools", shape: wide, label: "schema expanding to 2^24", args: func() string {
			return `{"plan":{"steps":[{"tool":"ct","arguments":{}}]},"client_tools":[{"name":"ct","input_schema":` + schemaDoubling(24) + `}]}`
		}, want: []string{"invalid_value"}, hint: "expands to more than"},
		{entry: "client_tools", shape: cyclic, label: "input_schema $ref #", args: func() string {
			return `{"plan":{"steps":[{"tool":"ct","arguments":{"x":1}}]},"client_tools":[{"name":"ct","input_schema":{"$ref":"#"}}]}`
		}, want: []string{"invalid_value"}, hint: "refers to itself"},
		{entry: "client_tools", shape: cyclic, label: "output_schema $defs cycle", args: func() string {
			return `{"plan":{"steps":[{"id":"a","tool":"ct","arguments":{}},{"tool":"json_query","arguments":{"query":".","input":"$a.output.v"}}]},"client_tools":[{"name":"ct","output_schema":{"type":"object","$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"properties":{"v":{"$ref":"#/$defs/a"}}}}]}`
		}, want: []string{"invalid_value"}, hint: "refers to itself"},
		{entry: "client_tools", shape: cyclic, label: "allOf self", args: func() string {
			return `{"plan":{"steps":[{"tool":"ct","arguments":{}}]},"client_tools":[{"name":"ct","input_schema":{"type":"object","allOf":[{"$ref":"#"}]}}]}`
		}, want: []string{"invalid_value"}, hint: "refers to itself"},
		{entry: "client_tools", shape: malformed, args: func() string {
			return `{"plan":{"steps":[{"tool":"ct","arguments":{}}]},"client_tools":[{"name":"ct","input_schema":{"type":"object","properties":{"a":{"pattern":"(?<=x)"}}}}]}`
		}, want: []string{"invalid_value"}},
		{entry: "client_tools", shape: wrongType, args: func() string { return `{"plan":{"steps":[{"tool":"ct"}]},"client_tools":"ct"}` }, want: []string{"invalid_value"}},

		// resume
		{entry: "resume", shape: huge, setup: pauseRun(`{"type":"object"}`), args: func() string {
			return `{"resume":{"exec_id":"{{EXEC}}","results":{"c":{"blob":` + big(3<<20) + `}}}}`
		}, want: []string{"success"}},
		{entry: "resume", shape: deep, setup: pauseRun(`{"type":"object"}`), args: func() string {
			return `{"resume":{"exec_id":"{{EXEC}}","results":{"c":{"d":` + deepArrays(990, "1") + `}}}}`
		}, want: []string{"success"}},
		{entry: "resume", shape: wide, setup: pauseRun(`{"type":"object"}`), args: func() string {
			keys := make([]string, 100_000)
			for i := range keys {
				keys[i] = fmt.Sprintf(`"k%d":1`, i)
			}
			return `{"resume":{"exec_id":"{{EXEC}}","results":{` + strings.Join(keys, ",") + `}}}`
		}, want: []string{"invalid_result", "too_many_issues"}},
		{entry: "resume", shape: cyclic, label: "a value costing 2^40 to check", setup: pauseRun(exponentialSchema), args: func() string {
			return `{"resume":{"exec_id":"{{EXEC}}","results":{"c":{"v":` + exponentialValue(40) + `}}}}`
		}, want: []string{"invalid_result"}, hint: "would apply more than"},
		{entry: "resume", shape: malformed, args: func() string { return `{"resume":{"exec_id":"no-such-run","results":{"c":1}}}` }, want: []string{"unknown_run", "not_found", "invalid_request"}},
		{entry: "resume", shape: wrongType, setup: pauseRun(`{"type":"object"}`), args: func() string {
			return `{"resume":{"exec_id":"{{EXEC}}","results":{"c":"not an object"}}}`
		}, want: []string{"invalid_result"}},

		// resources
		{entry: "resources", shape: huge, line: func(id int) string {
			return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"resources/read","params":{"uri":"orchestra://executions/%s"}}`, id, strings.Repeat("x", 3<<20))
		}, want: []string{"jsonrpc:", "http:431"}}, // over HTTP the URI is also the Mcp-Name header
		{entry: "resources", shape: malformed, line: func(id int) string {
			return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"resources/read","params":{"uri":"orchestra://insights?cursor=not-a-cursor"}}`, id)
		}, want: []string{"jsonrpc:-32602"}, hint: "start again"},
		{entry: "resources", shape: wrongType, line: func(id int) string {
			return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"resources/read","params":{"uri":5}}`, id)
		}, want: []string{"jsonrpc:"}},

		// downstream.tools: listed, each usable, its schema replaced.
		{entry: "downstream.tools", shape: cyclic, label: "input $ref #", args: downstreamCall("hostile__cyclic_input"), want: []string{"success"}},
		{entry: "downstream.tools", shape: cyclic, label: "output $defs cycle", args: func() string {
			return `{"plan":{"steps":[{"id":"a","tool":"hostile__cyclic_output","arguments":{}},{"tool":"json_query","arguments":{"query":".","input":"$a.output.v"}}]}}`
		}, want: []string{"success", "tool_error", "template_error"}},
		{entry: "downstream.tools", shape: deep, args: downstreamCall("hostile__deep_schema"), want: []string{"success"}},
		{entry: "downstream.tools", shape: huge, args: downstreamCall("hostile__huge_schema"), want: []string{"success"}},
		{entry: "downstream.tools", shape: wide, args: downstreamCall("hostile__wide_schema"), want: []string{"success"}},
		{entry: "downstream.tools", shape: malformed, args: downstreamCall("hostile__malformed_schema"), want: []string{"success"}},
		{entry: "downstream.tools", shape: wrongType, args: downstreamCall("hostile__wrong_type_schema"), want: []string{"success"}},

		// downstream.result
		{entry: "downstream.result", shape: huge, args: resultCall(huge), want: []string{"tool_error"}, hint: "max_downstream_response_bytes"},
		{entry: "downstream.result", shape: deep, args: resultCall(deep), want: []string{"tool_error"}, hint: "nested deeper"},
		{entry: "downstream.result", shape: wide, args: resultCall(wide), want: []string{"tool_error"}, hint: "values"},
		{entry: "downstream.result", shape: cyclic, label: "an output costing 2^40 to check", args: func() string {
			return `{"plan":{"steps":[{"tool":"hostile__exponential","arguments":{}}]}}`
		}, want: []string{"tool_error"}, hint: "would apply more than"},
		{entry: "downstream.result", shape: slow, args: resultCall(slow), want: []string{"timeout", "deadline_exceeded"}},
		{entry: "downstream.result", shape: endless, args: resultCall(endless), want: []string{"tool_error", "timeout", "deadline_exceeded"}, hint: "", timeout: 2 * time.Minute},
		{entry: "downstream.result", shape: malformed, args: resultCall(malformed), want: []string{"timeout", "deadline_exceeded"}},
		{entry: "downstream.result", shape: wrongType, args: resultCall(wrongType), want: []string{"tool_error", "server_unavailable"}},

		// model.planner
		{entry: "model.planner", shape: huge, before: modelMode("huge"), args: promptCall, want: []string{"planner_failed"}, hint: "max_response_bytes"},
		{entry: "model.planner", shape: deep, before: modelMode("deep"), args: promptCall, want: []string{"planner_failed", "too_large"}, hint: "nested deeper"},
		{entry: "model.planner", shape: wide, label: "600,000 values in the arguments", before: modelMode("wide"), args: promptCall, want: []string{"planner_failed", "too_large"}},
		{entry: "model.planner", shape: wide, label: "20,000 streamed calls", before: modelMode("quadratic"), args: streamedPromptCall, want: []string{"planner_failed", "validation", "too_many_steps"}, timeout: 2 * time.Minute},
		{entry: "model.planner", shape: slow, before: modelMode("slow"), args: promptCall, want: []string{"planner_failed", "timeout"}, timeout: time.Minute},
		{entry: "model.planner", shape: endless, label: "text", before: modelMode("endless text"), args: streamedPromptCall, want: []string{"planner_failed"}, hint: "max_response_bytes", timeout: 2 * time.Minute},
		{entry: "model.planner", shape: endless, label: "arguments", before: modelMode("endless arguments"), args: streamedPromptCall, want: []string{"planner_failed"}, hint: "max_response_bytes", timeout: 2 * time.Minute},
		{entry: "model.planner", shape: malformed, before: modelMode("malformed"), args: promptCall, want: []string{"planner_failed"}},
		{entry: "model.planner", shape: wrongType, before: modelMode("wrong type"), args: promptCall, want: []string{"planner_failed", "invalid_value"}},

		// model.agent
		{entry: "model.agent", shape: huge, before: modelMode("huge"), args: agentCall, want: []string{"model_error", "tool_error"}, hint: "max_response_bytes"},
		{entry: "model.agent", shape: slow, before: modelMode("slow"), args: agentCall, want: []string{"model_error", "timeout", "tool_error"}, timeout: time.Minute},
		{entry: "model.agent", shape: endless, before: modelMode("endless text"), args: agentCall, want: []string{"model_error", "tool_error"}, hint: "max_response_bytes", timeout: 2 * time.Minute},
		{entry: "model.agent", shape: malformed, before: modelMode("malformed"), args: agentCall, want: []string{"model_error", "tool_error"}},
	}
}

// downstreamCall calls tool of the hostile downstream server.
func downstreamCall(tool string) func() string {
	return func() string { return `{"plan":{"steps":[{"tool":"` + tool + `","arguments":{}}]}}` }
}

// resultCall asks the hostile downstream server for an answer of shape s.
func resultCall(s shape) func() string {
	return func() string {
		// A step waits 3 s for the shapes that never answer, 40 s (a
		// bound on a hang only) for the others.
		ms := 40_000
		if s == slow || s == malformed {
			ms = 3000
		}
		return fmt.Sprintf(`{"plan":{"steps":[{"tool":"hostile__result","arguments":{"shape":%q},"timeout_ms":%d}]}}`, s, ms)
	}
}

func promptCall() string { return `{"prompt":"look something up","timeout_ms":20000}` }

// streamedPromptCall gives a streamed answer a minute, a bound on a hang.
func streamedPromptCall() string { return `{"prompt":"look something up","timeout_ms":60000}` }

func agentCall() string {
	return `{"plan":{"steps":[{"id":"r","agent":"probe","prompt":"say hello"}]},"timeout_ms":20000}`
}

func modelMode(m string) func(h *harness) { return func(h *harness) { h.model.set(m) } }

// pauseRun pauses a run at a client tool whose output schema is schema,
// and gives its exec id as {{EXEC}}.
func pauseRun(schema string) func(h *harness, t transport) (map[string]string, error) {
	return func(h *harness, t transport) (map[string]string, error) {
		out, err := h.call(t, `{"plan":{"steps":[{"id":"c","tool":"ct","arguments":{}}]},"client_tools":[{"name":"ct","output_schema":`+schema+`}]}`, time.Minute)
		if err != nil {
			return nil, err
		}
		if out.exec == "" {
			return nil, fmt.Errorf("the run did not pause: %s %.300s", out.code, out.text)
		}
		return map[string]string{"EXEC": out.exec}, nil
	}
}
