// Package jsonrpcerr writes the JSON-RPC errors orchestra's transports
// answer for messages the SDK never sees: a stdio line that is not JSON or
// is too long, an HTTP body over the size limit, a session beyond the cap.
// It reads the request's id from what arrived of the message, so that the
// error fails only that request, and answers with a null id when it
// cannot.
//
//	id, _ := jsonrpcerr.RequestID(line)
//	w.Write(jsonrpcerr.Encode(id, jsonrpc.CodeParseError, "parse error: ..."))
package jsonrpcerr

import (
	"bytes"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Encode returns the JSON-RPC error response for the request id; an id
// that is not valid (the zero ID) is written as null.
func Encode(id jsonrpc.ID, code int64, msg string) []byte {
	var resp []byte
	if id.IsValid() {
		resp, _ = jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: code, Message: msg}})
	} else {
		resp, _ = json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": code, "message": msg}})
	}
	return resp
}

// RawID returns the id a message holds as raw JSON (its "id" member), if
// it is a valid JSON-RPC id.
func RawID(raw json.RawMessage) (jsonrpc.ID, bool) {
	var v any
	if json.Unmarshal(raw, &v) != nil || v == nil {
		return jsonrpc.ID{}, false
	}
	id, err := jsonrpc.MakeID(v)
	return id, err == nil
}

// RequestID finds the id of the JSON-RPC request that data starts with;
// data may be cut short after the id.
func RequestID(data []byte) (jsonrpc.ID, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return jsonrpc.ID{}, false
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return jsonrpc.ID{}, false
		}
		if key != "id" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return jsonrpc.ID{}, false
			}
			continue
		}
		var v any
		if err := dec.Decode(&v); err != nil || v == nil {
			return jsonrpc.ID{}, false
		}
		id, err := jsonrpc.MakeID(v)
		return id, err == nil
	}
	return jsonrpc.ID{}, false
}
