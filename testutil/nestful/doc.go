// Package nestful turns the NESTFUL benchmark (nested sequences of API calls,
// Apache-2.0) into orchestra plans and tools, so that the plan validator and
// executor can be tested on 300 human-checked multi-step sequences.
//
// Load reads the dataset's data and spec files and returns one Sample per
// sequence, with its plan in orchestra's JSON form, and one registry.Tool per
// spec function. The tools are fakes: each returns a deterministic
// structured output shaped by its output schema, so every gold plan can run
// offline. Where the gold data and the specs disagree (an argument typed
// "boolean" given "time", a field the output spec does not declare), the
// schemas are widened or opened at that point, never the data bent, and
// each such decision is counted in Stats and listed in Notes.
//
// Mutate derives invalid plans from a sample (a missing field, a forward
// reference, a type mismatch) together with the validation error they must
// produce.
//
//	ds, err := nestful.Load(nestful.Dir(t))
//	if err != nil {
//		t.Fatal(err)
//	}
//	cat := registry.NewCatalog(ds.Tools...)
//	for _, s := range ds.Samples {
//		// validate and run s.Plan against cat
//	}
package nestful
