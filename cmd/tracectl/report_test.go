package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
)

// TestReportEscapes renders the hostile fixture: every attempt id is in
// the page, no evidence string arrives as markup or as a raw control
// character, and the page declares that it loads nothing.
func TestReportEscapes(t *testing.T) {
	bundle := fixtureDir(t, "hostile")
	out := filepath.Join(t.TempDir(), "report.html")
	if _, stderr, code := runCLI(t, "report", "--out", out, bundle); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	page := readFileT(t, out)
	for _, want := range []string{`id="attempt-a1"`, `id="attempt-a5"`, "&lt;script&gt;alert(1)&lt;/script&gt;", `\x1b[31mred`, `two\nlines`,
		`<meta http-equiv="Content-Security-Policy" content="default-src 'none';`, "not verified"} {
		if !bytes.Contains(page, []byte(want)) {
			t.Errorf("report lacks %q", want)
		}
	}
	for _, bad := range []string{"<script>", "\x1b", "two\nlines", "onerror", "<link", "@import", "url(http"} {
		if bytes.Contains(page, []byte(bad)) {
			t.Errorf("report holds %q", bad)
		}
	}
	if fi, err := os.Stat(out); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("report mode %v (%v), want 0600", fi.Mode(), err)
	}
}

func chromiumPath(t *testing.T) string {
	if p := os.Getenv("TRACECTL_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("chromium not found (set TRACECTL_CHROMIUM, or apt-get install chromium; .ci/run installs it where apt is available)")
	return ""
}

// refusingProxy is the browser's only way out: nothing the browser asks
// for leaves the machine (the page's requests are counted from the
// DevTools events, not here: the browser's own traffic goes here too).
type refusingProxy struct{}

func (refusingProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	http.Error(w, "no network in tests", http.StatusForbidden)
}

// pageLoad is what Chromium did with one page: the DOM after load, a
// full-page PNG, and every request the page itself issued (the document
// aside), seen through the DevTools protocol's Network events of its tab;
// the browser's own background traffic is not the page's.
type pageLoad struct {
	dom      string
	png      []byte
	requests []string
}

func chromium(t *testing.T, bin, page, proxy string) pageLoad {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.UserDataDir(t.TempDir()),
		// Nothing leaves the machine: every request goes to the refusing proxy.
		chromedp.ProxyServer(proxy), chromedp.Flag("proxy-bypass-list", "<-loopback>"),
		chromedp.WindowSize(1280, 1600),
	}
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	defer acancel()
	var mu sync.Mutex
	var load pageLoad
	doc := "file://" + page
	cctx, ccancel := chromedp.NewContext(actx, chromedp.WithListener(func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok && e.Request.URL != doc {
			mu.Lock()
			load.requests = append(load.requests, e.Request.URL)
			mu.Unlock()
		}
	}))
	defer ccancel()
	if err := chromedp.Do(cctx, chromedp.Navigate(doc)); err != nil {
		t.Fatalf("chromium: navigate: %v", err)
	}
	var err error
	if load.dom, err = chromedp.Run(cctx, chromedp.OuterHTML(chromedp.CSS("html"))); err != nil {
		t.Fatalf("chromium: DOM: %v", err)
	}
	if load.png, err = chromedp.Run(cctx, chromedp.FullScreenshot(100)); err != nil {
		t.Fatalf("chromium: screenshot: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	load.requests = append([]string(nil), load.requests...)
	return load
}

// TestReportChromium renders the report in headless Chromium: a
// screenshot is taken, the DOM holds every attempt id, and the page made
// no network request. A control page with one image from the network
// proves that requests are seen.
func TestReportChromium(t *testing.T) {
	bin := chromiumPath(t)
	srv := httptest.NewServer(refusingProxy{})
	defer srv.Close()
	dir := t.TempDir()

	control := filepath.Join(dir, "control.html")
	os.WriteFile(control, []byte(`<!DOCTYPE html><html><body><img src="http://tracectl-test.invalid/x.png"></body></html>`), 0o600)
	if c := chromium(t, bin, control, srv.URL); len(c.requests) == 0 {
		t.Fatal("the control page's image request was not seen: the test cannot see requests")
	}

	bundle := fixtureDir(t, "basic")
	page := filepath.Join(dir, "report.html")
	key := filepath.Join(dir, "key.pub")
	writeFixtureKey(t, key)
	if _, stderr, code := runCLI(t, "report", "--trusted-key", key, "--at", "2026-07-01T12:00:00Z", "--out", page, bundle); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	load := chromium(t, bin, page, srv.URL)
	for _, id := range []string{"a1", "a2", "a3", "a4", "a5", "a6"} {
		if !strings.Contains(load.dom, `id="attempt-`+id+`"`) || !strings.Contains(load.dom, `id="bar-`+id+`"`) {
			t.Errorf("DOM lacks attempt %s in the table or the timeline", id)
		}
	}
	if !bytes.HasPrefix(load.png, []byte("\x89PNG\r\n\x1a\n")) || len(load.png) < 10000 {
		t.Errorf("screenshot is not a PNG of a page (%d bytes)", len(load.png))
	}
	if !strings.Contains(load.dom, "transcript_bound") || !strings.Contains(load.dom, `class="verdict v-verified"`) {
		t.Error("DOM lacks the verdict and findings")
	}
	if len(load.requests) > 0 {
		t.Errorf("the report made network requests: %q", load.requests)
	}

	// The hostile fixture's markup and escapes stay text in the browser: no
	// element came from the evidence, and the page still loads nothing.
	hostile := filepath.Join(dir, "hostile.html")
	if _, stderr, code := runCLI(t, "report", "--out", hostile, fixtureDir(t, "hostile")); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	h := chromium(t, bin, hostile, srv.URL)
	if strings.Contains(h.dom, "<script") || strings.Contains(h.dom, "<img") || !strings.Contains(h.dom, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Error("the hostile tool name became markup in the browser's DOM")
	}
	if len(h.requests) > 0 {
		t.Errorf("the hostile report made network requests: %q", h.requests)
	}
	if out := os.Getenv("TRACECTL_REPORT_PNG"); out != "" {
		if err := os.WriteFile(out, load.png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func writeFixtureKey(t *testing.T, path string) {
	t.Helper()
	key, err := fixtureKey()
	if err != nil {
		t.Fatal(err)
	}
	pub, err := cryptoutils.MarshalPublicKeyToPEM(key.Public())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, pub, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestReportAttention: a failed bundle's report opens with what needs
// attention (the failing findings, worst first, linked to their attempts)
// before the full findings table, which lists failures before passes;
// codes never break mid-word; --include-arguments shows each call's
// arguments and result, and without it the page says how to see them.
func TestReportAttention(t *testing.T) {
	bundle := fixtureDir(t, "basic")
	dir := t.TempDir()
	key := filepath.Join(dir, "key.pub")
	writeFixtureKey(t, key)
	ok := filepath.Join(dir, "ok.html")
	if _, stderr, code := runCLI(t, "report", "--trusted-key", key, "--at", "2026-07-01T12:00:00Z", "--include-arguments", "--out", ok, bundle); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	page := string(readFileT(t, ok))
	// The fixture verifies with two warnings (an invented tool name, a
	// changed declaration): they need attention, nothing fails.
	for _, want := range []string{`<div class="attention warn" id="attention"><strong>Needs attention (2):`, `<a href="#attempt-a3">attempt a3</a>`,
		"<pre class=\"content\">{&#34;message&#34;:&#34;hello&#34;}</pre>", "code{white-space:nowrap}"} {
		if !strings.Contains(page, want) {
			t.Errorf("the verified report lacks %q", want)
		}
	}
	if box := page[strings.Index(page, `id="attention"`):strings.Index(page, "<h2>Verification findings</h2>")]; strings.Contains(box, "s-fail") {
		t.Error("the verified report's attention box holds a failure")
	}
	if strings.Contains(page, "break-all") || strings.Contains(page, "--include-arguments</code> shows them") {
		t.Error("the verified report breaks words anywhere, or asks for --include-arguments it was given")
	}

	// Tamper: the transcript no longer matches the signed root.
	tr := filepath.Join(bundle, "transcript.jsonl")
	data := readFileT(t, tr)
	data = bytes.Replace(data, []byte(`"tool":"echo"`), []byte(`"tool":"ECHO"`), 1)
	if err := os.WriteFile(tr, data, 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.html")
	runCLI(t, "report", "--trusted-key", key, "--at", "2026-07-01T12:00:00Z", "--out", bad, bundle)
	page = string(readFileT(t, bad))
	att, all := strings.Index(page, "Needs attention"), strings.Index(page, "<h2>Verification findings</h2>")
	if att < 0 || all < 0 || att > all {
		t.Fatalf("the failed report's attention box (at %d) is not before the findings (at %d)", att, all)
	}
	table := page[all:]
	if f, p := strings.Index(table, `class="s-fail"`), strings.Index(table, `class="s-pass"`); f < 0 || (p >= 0 && p < f) {
		t.Errorf("in the findings table the first failure is at %d, the first pass at %d: failures come first", f, p)
	}
	if !strings.Contains(page[att:all], `class="s-fail"`) {
		t.Error("the attention box holds no failing finding")
	}
	if !strings.Contains(page, "--include-arguments</code> shows them") {
		t.Error("the report without --include-arguments does not say how to see arguments")
	}
}
