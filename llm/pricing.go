package llm

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Price is what a model's tokens cost, in US dollars per million tokens.
type Price struct {
	// Input is the price of a million input (prompt) tokens.
	Input float64 `yaml:"input" json:"input"`
	// Output is the price of a million output (completion) tokens.
	Output float64 `yaml:"output" json:"output"`
}

// Prices are the configured prices of models, by model name (the pricing
// block). Nothing is priced that is not configured: a model without a
// price has no cost, never a guessed one.
type Prices map[string]Price

// Cost returns what usage cost in US dollars, priced as the first of
// names that has a price (a model's Name, then the name its provider
// reported); false when none has one. A Name, "provider:model", is
// priced under its whole name or under the model's alone.
func (p Prices) Cost(u Usage, names ...string) (float64, bool) {
	for _, n := range names {
		if n == "" {
			continue
		}
		pr, ok := p[n]
		if provider, model, cut := strings.Cut(n, ":"); !ok && cut && slices.Contains(providers, provider) {
			pr, ok = p[model]
		}
		if ok {
			return (float64(u.InputTokens)*pr.Input + float64(u.OutputTokens)*pr.Output) / 1e6, true
		}
	}
	return 0, false
}

// providers are those whose models' Name is "provider:model".
var providers = []string{ProviderOpenAI, ProviderAnthropic}

// Validate reports the prices that are negative, naming their keys.
func (p Prices) Validate() []string {
	var problems []string
	for _, name := range slices.Sorted(maps.Keys(p)) {
		if pr := p[name]; pr.Input < 0 || pr.Output < 0 {
			problems = append(problems, fmt.Sprintf("pricing.%s: input and output must not be negative (US dollars per million tokens)", name))
		}
	}
	return problems
}
