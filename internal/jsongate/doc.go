// Package jsongate is the one gate JSON from outside passes before it is
// decoded: a request's bytes, a configuration or CLI file, a downstream
// server's message, a model's answer. It bounds the document's bytes, how
// deeply it nests and how many values it holds, in one pass over the bytes
// that allocates nothing, so that no document can make decoding
// materialise more than its limits allow.
//
// A document is checked whole:
//
//	lim := jsongate.Default(4 << 20)
//	if err := lim.Check(data); err != nil {
//		return fmt.Errorf("the request is %w (server.max_request_elements)", err)
//	}
//
// or as it arrives, for a stream or a response body:
//
//	body := lim.Reader(resp.Body) // fails with *jsongate.Error past a limit
//
// and a [Scanner] follows a document written in pieces.
package jsongate
