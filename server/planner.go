package server

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/planner"
	"github.com/orchestra-mcp/orchestra/registry"
)

// plannerExample is what the errors about a missing planner suggest.
const plannerExample = `add a planner block to the configuration file, for example:
  planner:
    provider: openai          # or anthropic; set base_url for Ollama, vLLM, llama.cpp, LM Studio, OpenRouter
    model: gpt-4o-mini
    # the API key is read from OPENAI_API_KEY (ANTHROPIC_API_KEY for anthropic); api_key_env names another variable`

// plannerSetup is the App's planner: a configured model, or, without one,
// the client's model through MCP sampling.
type plannerSetup struct {
	base     *planner.Planner
	model    llm.Model // the configured model; nil samples the client's
	provider string    // the configured provider, if any
	key      []byte    // signs the state of multi round-trip sampling
	sampling llm.SamplingOptions
	options  planner.Options // the planner block's own options (fallback, context, lessons), for the tenants' planners too
}

// newPlanner builds the planner a configuration describes. A planner block
// that names a model which cannot be built (no API key, no script) is an
// error here, so that a misconfigured server does not start.
func newPlanner(cfg *config.Config, cat *registry.Catalog, engine *orchestrate.Engine, forbidden func(string) bool, learned planner.Lessons, log *slog.Logger) (*plannerSetup, error) {
	ps := &plannerSetup{sampling: llm.SamplingOptions{Logger: log}}
	if pc := cfg.Planner; pc != nil {
		ps.provider = pc.Provider
		if pc.Provider == llm.ProviderSampling {
			ps.sampling.MaxTokens, ps.sampling.Temperature, ps.sampling.Timeout = pc.MaxTokens, pc.Temperature, pc.Timeout.D()
		} else {
			m, err := llm.New(pc.Config, llm.Options{Logger: log})
			if err != nil {
				return nil, fmt.Errorf("planner: %w", err)
			}
			ps.model = m
		}
	}
	key, err := stateKey(cfg.Server.StateKeyEnv)
	if err != nil {
		return nil, err
	}
	ps.key = key
	fallback, contextTokens, insights, reflection := cfg.Planner.PlannerOptions()
	ps.options = planner.Options{Fallback: fallback, ContextTokens: contextTokens, Lessons: learned, Insights: insights, Reflection: reflection}
	ps.options.Stream = cfg.Planner.StreamPolicy()
	ps.options.Prices = cfg.Pricing
	if cfg.Planner != nil {
		ps.options.Instructions.Operator = cfg.Planner.Instructions
	}
	opts := ps.options
	opts.Catalog, opts.Engine, opts.Model, opts.Forbidden = cat, engine, ps.model, forbidden
	opts.Attempts, opts.MaxToolSteps, opts.Logger = cfg.Limits.PlannerAttempts, cfg.Limits.MaxToolSteps, log
	ps.base = planner.New(opts)
	return ps, nil
}

// stateKey reads the signing key from the environment variable env, or
// makes a random one for this process.
func stateKey(env string) ([]byte, error) {
	if env != "" {
		v := os.Getenv(env)
		if len(v) < 16 {
			return nil, fmt.Errorf("server.state_key_env names %s, which must hold a secret of at least 16 bytes (it holds %d)", env, len(v))
		}
		return []byte(v), nil
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("making the state key: %w", err)
	}
	return key, nil
}

// Planner returns the planner with the configured model, for the CLI's
// plan and ask. Without a configured model it says what to configure.
func (a *App) Planner() (*planner.Planner, error) {
	ps := a.planner
	switch {
	case ps.model != nil:
		return ps.base, nil
	case ps.provider == llm.ProviderSampling:
		return nil, fmt.Errorf("planner provider %q samples an MCP client's model, and there is no client here; to plan from the command line, %s", llm.ProviderSampling, plannerExample)
	}
	return nil, errors.New("no planner is configured; " + plannerExample)
}

// prompt runs the prompt path of agent_orchestrate with engine e (the
// app's, with the options of the request): with the configured model, or
// with the client's through sampling. On protocol 2026-07-28 sampling is a
// multi round-trip request: a round that needs the client's answer returns
// the input request (and no envelope), and the next round replays the
// answers so far from the signed request state.
func (a *App) prompt(ctx context.Context, e *orchestrate.Engine, req *mcp.CallToolRequest, r *orchestrate.Request) (*mcp.CallToolResult, *orchestrate.Envelope) {
	ps := a.planner
	p, model := a.callerPlanner(e, req)
	var input *llm.InputSampling
	fail := func(err error) (*mcp.CallToolResult, *orchestrate.Envelope) {
		env := e.RunPrompt(ctx, r, failPlanning(err))
		return a.resultFor(req, env), env
	}
	if model == nil {
		m, err := llm.SamplingFor(req, ps.key, ps.sampling)
		if err != nil {
			if errors.Is(err, llm.ErrUnavailable) {
				err = fmt.Errorf("no planner model is configured and this client does not support sampling: %s", plannerExample)
			}
			return fail(err)
		}
		input, _ = m.(*llm.InputSampling)
		p = p.WithModel(m)
	}
	env, err := p.Run(ctx, r)
	if err != nil {
		if input != nil && input.Pending() {
			if res, ierr := input.InputResult(); ierr == nil {
				return res, nil
			} else {
				err = ierr
			}
		}
		return fail(err)
	}
	a.finishRun(ctx, r, env)
	return a.resultFor(req, env), env
}

// viewCatalog is a catalog in which view's tools stand for those of the
// same name (a caller's own workflows).
type viewCatalog struct {
	*registry.Catalog
	view func(string) (registry.Tool, bool)
}

func (c viewCatalog) List() []registry.Tool { return viewed(c.Catalog.List(), c.view) }

// viewed puts in tools, in place, view's tool for each it has one of; view
// nil changes nothing.
func viewed(tools []registry.Tool, view func(string) (registry.Tool, bool)) []registry.Tool {
	if view == nil {
		return tools
	}
	for i, t := range tools {
		if own, ok := view(t.Name); ok {
			tools[i] = own
		}
	}
	return tools
}

// callerPlanner returns the planner for req with engine e, seeing the
// caller's own workflows, not the catalog's neutral ones, and its model
// (nil when the client's, through sampling, is to be used).
func (a *App) callerPlanner(e *orchestrate.Engine, req *mcp.CallToolRequest) (*planner.Planner, llm.Model) {
	base, model := a.plannerFor(req)
	p := base.WithEngine(e)
	if view := a.workflowView(a.caller(req.Extra)); view != nil {
		p = p.WithCatalog(viewCatalog{a.Catalog, view})
	}
	return p, model
}

// resumeFallback returns what goes on with a run that paused in its
// planner's reactive fallback, resumed by req with engine e: the planner
// prompt would use for req, with its model or the client's through
// sampling. nil when there is none (the run then fails with
// not_resumable, saying so).
func (a *App) resumeFallback(e *orchestrate.Engine, req *mcp.CallToolRequest) *orchestrate.Fallback {
	p, model := a.callerPlanner(e, req)
	if model == nil {
		m, err := llm.SamplingFor(req, a.planner.key, a.planner.sampling)
		if err != nil {
			return nil
		}
		if _, input := m.(*llm.InputSampling); input {
			return nil // no reactive fallback answers through input requests
		}
		p = p.WithModel(m)
	}
	return p.ResumeFallback()
}

// failPlanning is a planner that fails with err.
func failPlanning(err error) orchestrate.PlanFunc {
	return func(context.Context) (*orchestrate.Plan, *orchestrate.PlannerInfo, []*orchestrate.Issue, error) {
		return nil, nil, nil, err
	}
}
