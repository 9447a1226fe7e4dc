package jsonrpcerr

import (
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

func TestRequestID(t *testing.T) {
	for _, tc := range []struct {
		data string
		want string // the id as JSON; "" for none
	}{
		{`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"arguments":{"x":"`, "7"},
		{`{"method":"x","params":{"a":[1,2]},"id":"abc"}`, `"abc"`},
		{`{"jsonrpc":"2.0","method":"notifications/cancelled"}`, ""},
		{`{"id":null}`, ""},
		{`{"id":{"a":1}}`, ""},
		{`[{"id":1}]`, ""},
		{`{"params":{"x":"cut here`, ""},
		{``, ""},
	} {
		id, ok := RequestID([]byte(tc.data))
		got := ""
		if ok {
			data, _ := json.Marshal(id.Raw())
			got = string(data)
		}
		if got != tc.want {
			t.Errorf("RequestID(%q) = %s, want %s", tc.data, got, tc.want)
		}
	}
}

func TestEncode(t *testing.T) {
	id, err := jsonrpc.MakeID(float64(3))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(Encode(id, -32600, "too large")), `{"jsonrpc":"2.0","id":3,"error":{"code":-32600,"message":"too large"}}`; got != want {
		t.Errorf("Encode with an id = %s, want %s", got, want)
	}
	if got, want := string(Encode(jsonrpc.ID{}, -32700, "parse error")), `{"error":{"code":-32700,"message":"parse error"},"id":null,"jsonrpc":"2.0"}`; got != want {
		t.Errorf("Encode without an id = %s, want %s", got, want)
	}
	if rid, ok := RawID(json.RawMessage(`"x"`)); !ok || rid.Raw() != "x" {
		t.Errorf(`RawID("x") = %v, %v`, rid, ok)
	}
	if _, ok := RawID(json.RawMessage(`null`)); ok {
		t.Error("RawID(null) is an id")
	}
}
