package hostile

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// otherCases are the cases that are not one message to a serving
// orchestra: HTTP headers, the key set of a JWT issuer, files given to the
// CLI.
func otherCases() []hcase {
	var cs []hcase
	// auth: the long-running HTTP server.
	cs = append(cs,
		hcase{entry: "auth", shape: huge, run: authCase(func(r *http.Request, _ int) { r.Header.Set("Authorization", "Bearer "+strings.Repeat("x", 2<<20)) }, 1),
			want: []string{"http:431"}},
		hcase{entry: "auth", shape: wide, label: "300 made-up JWT-shaped tokens", run: authCase(func(r *http.Request, i int) {
			r.Header.Set("Authorization", fmt.Sprintf("Bearer eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4%d.c2ln%d", i, i))
		}, 300), want: []string{"http:429", "http:401"}}, // 429 once the address's failures pass the rate: a rate the loaded machine may not reach (TestGarbageTokensHitTheAddressLimit pins it)
		hcase{entry: "auth", shape: malformed, run: authCase(func(r *http.Request, _ int) { r.Header.Set("Authorization", "Bearer") }, 1),
			want: []string{"http:401"}, hint: "Authorization: Bearer"},
		hcase{entry: "auth", shape: wrongType, run: authCase(func(r *http.Request, _ int) { r.Header.Set("Authorization", "Basic dXNlcjpwYXNz") }, 1),
			want: []string{"http:401"}},
	)
	// jwks: an orchestra serve --http of its own per case, whose issuer
	// answers as the shape says.
	for _, s := range []shape{huge, deep, wide, slow, endless, malformed, wrongType} {
		cs = append(cs, hcase{entry: "jwks", shape: s, run: jwksCase(string(s)), want: []string{"http:503", "http:401"}, timeout: time.Minute})
	}
	// config
	for _, c := range []struct {
		s          shape
		label      string
		file, hint string
	}{
		{huge, "", "# " + strings.Repeat("x", 5<<20) + "\n", "larger than the limit"},
		{endless, "/dev/zero", "/dev/zero", "larger than the limit"},
		{deep, "", "limits: " + strings.Repeat("[", 20_000) + strings.Repeat("]", 20_000) + "\n", "depth"},
		{wide, "alias bomb", aliasBomb(), "aliasing"},
		{cyclic, "an agent's output_schema $ref #", "agents:\n  a:\n    description: d\n    output_schema: {\"$ref\": \"#\"}\n", "refers to itself"},
		{malformed, "", "server: [unclosed\n", "yaml"},
		{wrongType, "", "server: 5\n", "server"},
	} {
		cs = append(cs, hcase{entry: "config", shape: c.s, label: c.label, run: cliCase(func(dir string) []string {
			return []string{"tools", "--config", fileOf(dir, "config.yaml", c.file)}
		}), want: []string{"exit:2"}, hint: c.hint})
	}
	// cli.plan, cli.results, cli.context
	files := []struct {
		s          shape
		label      string
		file, hint string
	}{
		{huge, "", `{"plan":{"steps":[]},"pad":` + bigString(5<<20) + `}`, "larger than the limit"},
		{endless, "/dev/zero", "/dev/zero", "larger than the limit"},
		{deep, "", deepArrays(100_000, ""), "nested deeper"},
		{wide, "", zeros(600_000), "values"},
		{malformed, "", `{"plan": {"steps": [`, ""},
		{wrongType, "", `[1, 2, 3]`, ""},
	}
	for _, f := range files {
		cs = append(cs,
			hcase{entry: "cli.plan", shape: f.s, label: f.label, run: cliCase(func(dir string) []string {
				return []string{"validate", fileOf(dir, "plan.json", f.file)}
			}), want: []string{"exit:2"}, hint: f.hint},
			hcase{entry: "cli.results", shape: f.s, label: f.label, run: cliCase(func(dir string) []string {
				return []string{"resume", "--store", "memory", "--results", fileOf(dir, "results.json", f.file), "some-run"}
			}), want: []string{"exit:2"}, hint: f.hint},
			hcase{entry: "cli.context", shape: f.s, label: f.label, run: cliCase(func(dir string) []string {
				return []string{"ask", "--context", fileOf(dir, "context.json", f.file), "a goal"}
			}), want: []string{"exit:2"}, hint: f.hint},
		)
	}
	cs = append(cs, hcase{entry: "cli.plan", shape: cyclic, run: cliCase(func(dir string) []string {
		return []string{"validate", fileOf(dir, "plan.json", `{"plan":{"steps":[{"id":"a","tool":"json_query","arguments":{"query":".","input":"$a.output"}}]}}`)}
	}), want: []string{"exit:2"}, hint: "self_ref"},
		hcase{entry: "cli.plan", shape: cyclic, label: "a client tool's input_schema $ref #", run: cliCase(func(dir string) []string {
			return []string{"validate", fileOf(dir, "plan.json", `{"plan":{"steps":[{"tool":"ct","arguments":{"x":1}}]},"client_tools":[{"name":"ct","input_schema":{"$ref":"#"}}]}`)}
		}), want: []string{"exit:2"}, hint: "refers to itself"})
	return cs
}

// aliasBomb is YAML whose aliases expand to 9^9 values.
func aliasBomb() string {
	var b strings.Builder
	b.WriteString("agents:\n  a:\n    description: d\n    output_schema:\n      $defs:\n")
	b.WriteString("        a: &a [\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\"]\n")
	prev := "a"
	for _, n := range []string{"b", "c", "d", "e", "f", "g", "h", "i"} {
		fmt.Fprintf(&b, "        %s: &%s [*%s,*%s,*%s,*%s,*%s,*%s,*%s,*%s,*%s]\n", n, n, prev, prev, prev, prev, prev, prev, prev, prev, prev)
		prev = n
	}
	return b.String()
}

// fileOf writes content to dir/name and returns the path; "/dev/zero" is
// itself.
func fileOf(dir, name, content string) string {
	if content == "/dev/zero" {
		return content
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		panic(err)
	}
	return path
}

// cliCase runs orchestra with the arguments args gives, under the
// address-space limit, and answers its exit code.
func cliCase(args func(dir string) []string) func(h *harness) outcome {
	return func(h *harness) outcome {
		dir, err := os.MkdirTemp(h.dir, "cli")
		if err != nil {
			return outcome{code: "harness", text: err.Error()}
		}
		ctx, cancel := context.WithTimeout(h.ctx, time.Minute)
		defer cancel()
		cmd := limited(ctx, h.orchestra, args(dir)...)
		cmd.Env = append(os.Environ(), "ORCHESTRA_CONFIG=", "XDG_STATE_HOME="+dir)
		out, err := cmd.CombinedOutput()
		code := 0
		if err != nil {
			code = -1
			if cmd.ProcessState != nil {
				code = cmd.ProcessState.ExitCode()
			}
		}
		return outcome{code: fmt.Sprintf("exit:%d", code), text: string(out), size: len(out)}
	}
}

// authCase sends n requests to the long-running HTTP server, each changed
// by set, and answers with the last one's status.
func authCase(set func(r *http.Request, i int), n int) func(h *harness) outcome {
	return func(h *harness) outcome {
		var last outcome
		retried := false
		for i := 0; i < n; i++ {
			req, _ := http.NewRequestWithContext(h.ctx, http.MethodPost, h.http.url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
			req.Header.Set("Mcp-Method", "ping")
			set(req, i)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return outcome{code: "harness", text: err.Error()}
			}
			body := readSome(resp)
			last = outcome{code: fmt.Sprintf("http:%d", resp.StatusCode), text: body, size: len(body)}
			if n == 1 && resp.StatusCode == http.StatusTooManyRequests && !retried {
				// An earlier case's failures from this address are still
				// being paid for: a client honours Retry-After, then
				// sends its one request again.
				retried = true
				wait, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
				select {
				case <-time.After(time.Duration(min(max(wait, 1), 10)) * time.Second):
				case <-h.ctx.Done():
					return last
				}
				i--
				continue
			}
		}
		return last
	}
}

// jwksCase starts an orchestra serve --http whose JWT issuer's key set
// answers as mode says, sends it a request with a JWT, and checks that it
// still serves a static token after.
func jwksCase(mode string) func(h *harness) outcome {
	return func(h *harness) outcome {
		h.jwks.set(mode)
		defer h.jwks.set("")
		srv, err := startHTTP(h.ctx, h.orchestra, h.httpConfig, h.env)
		if err != nil {
			return outcome{code: "harness", text: err.Error()}
		}
		defer srv.stop()
		status, body, err := srv.post(h.ctx, h.jwks.token("someone"), strings.NewReader(modern(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)), mcpHeaders{method: "ping"}, time.Minute)
		if err != nil {
			return outcome{code: "harness", text: err.Error()}
		}
		out := outcome{code: fmt.Sprintf("http:%d", status), text: string(body), size: len(body)}
		after := callLine(2, innocentPlan)
		if st, _, err := srv.post(h.ctx, attackerToken, strings.NewReader(modern(after)), headersOf(after), time.Minute); err != nil || st != http.StatusOK {
			out.code = fmt.Sprintf("not serving after (%d, %v)", st, err)
		}
		if !srv.alive() {
			out.code = "died"
		}
		h.noteRSS("jwks "+mode, srv.peakRSS())
		return out
	}
}

func readSome(resp *http.Response) string {
	defer resp.Body.Close()
	buf := make([]byte, 4096)
	n, _ := resp.Body.Read(buf)
	return string(buf[:n])
}
