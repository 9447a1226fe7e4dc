package hostile

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// bearer sends every request with a bearer token.
type bearer string

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

// innocent is a client with a token of its own that calls a small plan
// one call after another over a session of its own, and times each call.
type innocent struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu            sync.Mutex
	during        bool
	alone, loaded []time.Duration
	fails         int
}

func startInnocent(ctx context.Context, url string) *innocent {
	ctx, cancel := context.WithCancel(ctx)
	in := &innocent{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(in.done)
		tr := &mcp.StreamableClientTransport{Endpoint: url + "/mcp", HTTPClient: &http.Client{Transport: bearer(innocentToken)}}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "innocent", Version: "1"}, nil).Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			in.fail()
			return
		}
		defer cs.Close()
		var args map[string]any
		json.Unmarshal([]byte(innocentPlan), &args)
		for ctx.Err() == nil {
			start := time.Now()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "agent_orchestrate", Arguments: args})
			d := time.Since(start)
			if ctx.Err() != nil {
				return
			}
			if err != nil || res.IsError {
				in.fail()
			} else {
				in.add(d)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return in
}

func (in *innocent) fail() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.fails++
}

func (in *innocent) add(d time.Duration) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.during {
		in.loaded = append(in.loaded, d)
	} else {
		in.alone = append(in.alone, d)
	}
}

// phase starts timing the calls made during the cases.
func (in *innocent) phase(during bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.during = during
}

// stop ends the client and returns its latencies alone and during the
// cases, and how many calls failed.
func (in *innocent) stop() (alone, during []time.Duration, fails int) {
	in.cancel()
	<-in.done
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.alone, in.loaded, in.fails
}
