//go:build no_anthropic

package llm

// NewAnthropic reports that this binary was built without the Anthropic
// provider (the no_anthropic build tag).
func NewAnthropic(cfg Config, opts Options) (Model, error) {
	return nil, builtWithout(ProviderAnthropic, "no_anthropic")
}
