package hostile

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// modal is a fake server whose answers the matrix switches between cases.
type modal struct {
	mu   sync.Mutex
	mode string
}

func (m *modal) set(mode string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mode = mode
}

func (m *modal) get() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mode
}

// writeUntilGone writes head, then piece over and over until the client
// goes away or limit bytes are written.
func writeUntilGone(w http.ResponseWriter, r *http.Request, head, piece string, limit int64) {
	io.WriteString(w, head)
	p := []byte(strings.Repeat(piece, max(1, 32<<10/len(piece))))
	var n int64
	for r.Context().Err() == nil && n < limit {
		k, err := w.Write(p)
		n += int64(k)
		if err != nil {
			return
		}
	}
}

// planArgs is the planning tool's arguments of a good, small plan.
const planArgs = `{"type":"tool_calls","reasoning":"r","calls":[{"tool_name":"json_query","arguments":{"query":".","input":1}}]}`

// chunk is an OpenAI chat completion chunk carrying delta.
func chunk(delta string) string {
	return `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":` + delta + `}]}` + "\n\n"
}

// completion is an OpenAI chat completion whose message is msg.
func completion(msg string) string {
	return `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"tool_calls","message":` + msg + `}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`
}

// toolCallMessage is an assistant message calling __planning__ with args.
func toolCallMessage(args string) string {
	return `{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"__planning__","arguments":` + mustJSON(args) + `}}]}`
}

// newModel starts a fake OpenAI-compatible model whose answer the mode
// chooses; "" answers with a good plan.
func newModel() (*httptest.Server, *modal) {
	m := &modal{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Stream bool `json:"stream"`
		}
		data, _ := io.ReadAll(r.Body)
		json.Unmarshal(data, &body)
		mode := m.get()
		sse := func() { w.Header().Set("Content-Type", "text/event-stream") }
		js := func() { w.Header().Set("Content-Type", "application/json") }
		switch {
		case mode == "endless text":
			if body.Stream {
				sse()
				writeUntilGone(w, r, "", chunk(`{"content":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`), 1<<40)
				return
			}
			js()
			writeUntilGone(w, r, `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"`, "x", 1<<40)
		case mode == "endless arguments":
			sse()
			io.WriteString(w, chunk(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"__planning__","arguments":"{\"type\":\"tool_calls\",\"calls\":["}}]}`))
			writeUntilGone(w, r, "", chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"tool_name\":\"json_query\",\"arguments\":{\"query\":\".\",\"input\":1}},"}}]}`), 1<<40)
		case mode == "quadratic":
			// 20,000 calls of {}, one an event: cost the square of the
			// events when each was decoded again.
			sse()
			io.WriteString(w, chunk(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"__planning__","arguments":"{\"type\":\"tool_calls\",\"calls\":["}}]}`))
			for range 20000 {
				io.WriteString(w, chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{},"}}]}`))
			}
			io.WriteString(w, chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{}]}"}}]}`))
			io.WriteString(w, "data: [DONE]\n\n")
		case mode == "huge":
			js() // a streaming request gets it too, then the unstreamed one
			io.WriteString(w, completion(`{"role":"assistant","content":`+bigString(20<<20)+`}`))
		case mode == "deep":
			js()
			io.WriteString(w, completion(toolCallMessage(`{"type":"tool_calls","calls":[{"tool_name":"json_query","arguments":{"query":".","input":`+deepArrays(5000, "1")+`}}]}`)))
		case mode == "wide":
			js()
			io.WriteString(w, completion(toolCallMessage(`{"type":"tool_calls","calls":[{"tool_name":"json_query","arguments":{"query":".","input":`+zeros(600_000)+`}}]}`)))
		case mode == "malformed":
			js()
			io.WriteString(w, `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":`)
		case mode == "slow":
			<-r.Context().Done()
		case mode == "wrong type":
			js()
			io.WriteString(w, completion(toolCallMessage(`42`)))
		default:
			js()
			io.WriteString(w, completion(toolCallMessage(planArgs)))
		}
	}))
	return srv, m
}

// jwksFake is an authorization server: it signs tokens, and its JWK set
// endpoint answers as the mode says ("" with its real keys).
type jwksFake struct {
	*httptest.Server
	*modal
	key *rsa.PrivateKey
}

const (
	jwtIssuer   = "https://auth.hostile.test"
	jwtAudience = "https://orchestra.hostile.test/mcp"
)

func newJWKS() (*jwksFake, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	f := &jwksFake{modal: &modal{}, key: key}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch f.get() {
		case "huge":
			fmt.Fprintf(w, `{"keys":[],"padding":%s}`, bigString(2<<20))
		case "deep":
			fmt.Fprintf(w, `{"keys":%s}`, deepArrays(100_000, ""))
		case "wide":
			fmt.Fprintf(w, `{"keys":%s}`, zeros(400_000))
		case "endless":
			writeUntilGone(w, r, `{"keys":[`, `{"kty":"RSA","kid":"x","n":"AQAB","e":"AQAB"},`, 1<<40)
		case "slow":
			select {
			case <-r.Context().Done():
			case <-time.After(30 * time.Second):
			}
		case "malformed":
			io.WriteString(w, `{"keys":[{"kty":`)
		case "wrong type":
			io.WriteString(w, `{"keys":"all of them"}`)
		default:
			fmt.Fprintf(w, `{"keys":[{"kty":"RSA","kid":"k1","use":"sig","alg":"RS256","n":%q,"e":%q}]}`,
				base64.RawURLEncoding.EncodeToString(key.N.Bytes()), base64.RawURLEncoding.EncodeToString(big.NewInt(int64(key.E)).Bytes()))
		}
	}))
	return f, nil
}

// token signs an access token for sub.
func (f *jwksFake) token(sub string) string {
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{"iss": jwtIssuer, "aud": jwtAudience, "sub": sub, "exp": time.Now().Add(time.Hour).Unix()})
	tok.Header["kid"] = "k1"
	s, err := tok.SignedString(f.key)
	if err != nil {
		panic(err)
	}
	return s
}
