package main

import (
	"encoding/json"
	"reflect"
	"testing"
)

// The gold plan is sent in the planning format the prompt asks a model to
// write: calls by position, references to them as $i, and NESTFUL's
// var_result call replaced by the plan's return value or answer.
func TestGoldPlanAsCalls(t *testing.T) {
	gold := []byte(`{"steps":[
		{"id":"var1","tool":"search","arguments":{"q":"Rome"}},
		{"id":"var10","tool":"hotels","arguments":{"geo":"$var1.output.geoId","note":"near ${var1.output.name}","cost":"$$5"}},
		{"id":"var_result","tool":"var_result","arguments":{"hotels":"$var10.output","city":"${var1.output.name}","n":2}}]}`)
	calls := asCalls(gold)
	var got map[string]any
	if err := json.Unmarshal(calls, &got); err != nil {
		t.Fatal(err)
	}
	var want map[string]any
	_ = json.Unmarshal([]byte(`{"calls":[
		{"tool_name":"search","arguments":{"q":"Rome"}},
		{"tool_name":"hotels","arguments":{"geo":"$0.output.geoId","note":"near ${0.output.name}","cost":"$$5"}},
		{"tool_name":"var_result","arguments":{"hotels":"$1.output","city":"${0.output.name}","n":2}}]}`), &want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("asCalls = %s", calls)
	}

	plan, results, ok := withoutResult(calls)
	if !ok {
		t.Fatal("withoutResult did not find the var_result call")
	}
	if n := len(decodeMap(t, plan)["calls"].([]any)); n != 2 {
		t.Errorf("the plan keeps %d calls; want 2", n)
	}
	if ret := decodeMap(t, withReturn(plan, results))["return"]; !reflect.DeepEqual(ret, map[string]any{"hotels": "$1.output", "city": "${0.output.name}", "n": 2.0}) {
		t.Errorf("return = %v", ret)
	}
	if got, want := answerOf("Find a hotel", results), "Here is the result for: Find a hotel: city: ${0.output.name}, hotels: ${1.output}, n: 2"; got != want {
		t.Errorf("answerOf = %q\nwant      %q", got, want)
	}
	if _, _, ok := withoutResult(asCalls([]byte(`{"steps":[{"id":"a","tool":"search","arguments":{}}]}`))); ok {
		t.Error("withoutResult took a call out of a plan without var_result")
	}
}

func decodeMap(t *testing.T, data []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}
