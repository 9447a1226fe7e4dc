package tenancy

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/store"
)

// Key is the key of auth.TokenInfo.Extra that holds the caller's tenant.
const Key = "orchestra/tenant"

// Table recognises the tenants of callers.
type Table struct {
	cfg     map[string]config.Tenant
	byToken map[string]string
	names   []string // sorted, for a deterministic claims match
}

// NewTable returns the table of the tenants cfg configures; nil when it
// configures none.
func NewTable(cfg map[string]config.Tenant) *Table {
	if len(cfg) == 0 {
		return nil
	}
	tt := &Table{cfg: cfg, byToken: map[string]string{}, names: slices.Sorted(maps.Keys(cfg))}
	for _, name := range tt.names {
		for _, tok := range cfg[name].Match.Tokens {
			tt.byToken[tok] = name
		}
	}
	return tt
}

// ForToken returns the tenant of a static token's holder; "" when none
// matches: such a token is the operator's, with the global catalog.
func (tt *Table) ForToken(name string) string { return tt.byToken[name] }

// ForClaims returns the first tenant (by name) whose claims a JWT's all
// carry; a JWT caller must belong to a tenant when tenants are configured.
func (tt *Table) ForClaims(claims map[string]any) (string, bool) {
	for _, name := range tt.names {
		want := tt.cfg[name].Match.Claims
		if len(want) == 0 {
			continue
		}
		ok := true
		for k, v := range want {
			if !claimHas(k, claims[k], v) {
				ok = false
				break
			}
		}
		if ok {
			return name, true
		}
	}
	return "", false
}

// listClaims are the claims whose string value is a space-separated list
// (RFC 8693's scope, and scp): their members are matched one by one.
var listClaims = []string{"scope", "scp"}

// claimHas reports whether the claim name, of value claim, matches want:
// a string equals it whole (a scope-like claim of listClaims contains it
// as one of its space-separated members), a list holds it as an element,
// a boolean or number is written as it.
func claimHas(name string, claim any, want string) bool {
	switch c := claim.(type) {
	case string:
		return c == want || slices.Contains(listClaims, name) && slices.Contains(strings.Fields(c), want)
	case []any:
		for _, e := range c {
			if s, ok := e.(string); ok && s == want {
				return true
			}
		}
	case bool, float64:
		return fmt.Sprint(c) == want
	}
	return false
}

// Of returns the tenant of an authenticated caller, "" for none.
func Of(ti *auth.TokenInfo) string {
	if ti == nil {
		return ""
	}
	t, _ := ti.Extra[Key].(string)
	return t
}

// CallerScope is whose records a reader sees: an authenticated HTTP caller
// sees the runs it started, within its tenant; a caller without a
// credential (stdio, or HTTP without authentication, which serves
// loopback only unless told otherwise) is the machine's own and sees every
// run, as the CLI does.
func CallerScope(extra *mcp.RequestExtra) store.Scope {
	if extra == nil || extra.TokenInfo == nil || extra.TokenInfo.UserID == "" {
		return store.Scope{}
	}
	return store.OwnerScope(extra.TokenInfo.UserID).InTenant(Of(extra.TokenInfo))
}

// MaySee reports whether the caller of extra may read run.
func MaySee(extra *mcp.RequestExtra, run *store.Run) bool { return CallerScope(extra).SeesRun(run) }

// AllowsTool reports whether tenant t may call the tool name: it matches
// one of the tenant's globs, or comes from one of its servers. A tenant
// with neither may call every tool.
func AllowsTool(t config.Tenant, name string) bool {
	if len(t.Tools) == 0 && len(t.Servers) == 0 {
		return true
	}
	for _, g := range t.Tools {
		if ok, _ := path.Match(g, name); ok {
			return true
		}
	}
	for _, s := range t.Servers {
		if strings.HasPrefix(name, s+"__") {
			return true
		}
	}
	return false
}
