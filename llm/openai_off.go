//go:build no_openai

package llm

// NewOpenAI reports that this binary was built without the OpenAI provider
// (the no_openai build tag).
func NewOpenAI(cfg Config, opts Options) (Model, error) {
	return nil, builtWithout(ProviderOpenAI, "no_openai")
}
