package viewer_test

import (
	"context"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The browser tests drive a real headless Chromium (Debian's chromium
// package; .ci/run installs it) through the DevTools protocol. Without
// one they skip, unless ORCHESTRA_REQUIRE_BROWSER=1 (set by CI) makes that
// a failure. ORCHESTRA_CHROMIUM names another binary.
const (
	requireBrowserEnv = "ORCHESTRA_REQUIRE_BROWSER"
	chromiumEnv       = "ORCHESTRA_CHROMIUM"
)

// chromiumPath finds the Chromium to drive, or skips (fails under
// ORCHESTRA_REQUIRE_BROWSER=1) when there is none.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv(chromiumEnv); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no Chromium to drive (chromium, chromium-browser or google-chrome on PATH, or " + chromiumEnv + "): apt-get install chromium"
	if os.Getenv(requireBrowserEnv) == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// browser is the headless Chromium the package's tests share: starting
// one takes seconds on a loaded machine. Each test opens its tabs in
// browser contexts of their own (own cookies, own storage).
type browser struct {
	ctx  context.Context // the browser's first tab; new tabs open beside it
	stop func()
	err  error
}

var (
	shared     *browser
	sharedOnce sync.Once
)

// browserLife and tabTimeout bound a browser's and a tab's whole life:
// they only bound a hang.
const (
	browserLife = 15 * time.Minute
	tabTimeout  = 3 * time.Minute
)

// theBrowser returns the shared browser, starting it on first use; it
// skips the test without a Chromium (fails under
// ORCHESTRA_REQUIRE_BROWSER=1).
func theBrowser(t *testing.T) *browser {
	t.Helper()
	path := chromiumPath(t)
	sharedOnce.Do(func() { shared = startBrowser(path) })
	if shared.err != nil {
		t.Fatalf("starting %s: %v", path, shared.err)
	}
	return shared
}

// startBrowser starts a headless Chromium with a fresh profile. The flags
// keep it from reaching for the network (closed here) and from stalling:
// no component updates, sync, background fetches, QUIC or first-run UI.
func startBrowser(path string) *browser {
	profile, err := os.MkdirTemp("", "viewer-chromium")
	if err != nil {
		return &browser{err: err}
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("mute-audio", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1500, 1000),
	}
	// The browser's whole life is bounded, so that a stall fails the tests
	// rather than hanging them. (The first action on a tab's context starts
	// the browser, and cancelling that context would end it: the bound is
	// on the allocator.)
	life, cancelLife := context.WithTimeout(context.Background(), browserLife)
	actx, cancelAlloc := chromedp.NewExecAllocator(life, opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	b := &browser{ctx: bctx, stop: func() {
		cancelBrowser()
		cancelAlloc()
		cancelLife()
		os.RemoveAll(profile)
	}}
	b.err = chromedp.Do(bctx)
	return b
}

// stopBrowser ends the shared browser, if one started.
func stopBrowser() {
	if shared != nil && shared.stop != nil {
		shared.stop()
	}
}

// tab opens a tab in a browser context of its own: its own cookies, as
// another person's browser would have.
func (b *browser) tab(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx, chromedp.WithNewBrowserContext())
	ctx, cancelTimeout := context.WithTimeout(ctx, tabTimeout)
	t.Cleanup(func() {
		cancelTimeout()
		cancel()
	})
	return ctx
}

// do runs actions in tab, failing the test on error.
func do(t *testing.T, tab context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(tab, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// eval evaluates a JavaScript expression in tab and returns its value.
func eval[T any](t *testing.T, tab context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(tab, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}
