package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestProxyFlags: a non-loopback listen address needs --allow-remote and
// then --allowed-host; null is never an allowed origin; and
// --rotate-every takes a duration or a call count.
func TestProxyFlags(t *testing.T) {
	for addr, want := range map[string]bool{"127.0.0.1:8931": true, "[::1]:0": true, "localhost:1": true, "0.0.0.0:8931": false, ":8931": false, "192.168.1.2:80": false} {
		if got := loopback(addr); got != want {
			t.Errorf("loopback(%q) = %v, want %v", addr, got, want)
		}
	}
	if err := runProxy(t.Context(), streams{}, &proxyOptions{listen: "0.0.0.0:0", upstream: "http://127.0.0.1:1/mcp", rotateEvery: "1h", durability: "strict", retain: "full", streamIdle: time.Minute, maxFrame: 1 << 20, maxSessions: 8, maxInflight: 1 << 20}); err == nil {
		t.Fatal("a non-loopback listen address was accepted without --allow-remote")
	}
	ck := &proxyOptions{listen: "127.0.0.1:0", upstream: "http://127.0.0.1:1/mcp", rotateEvery: "1h", durability: "strict", retain: "full", streamIdle: time.Minute, maxFrame: 1 << 20, maxSessions: 8, maxInflight: 1 << 20}
	if err := ck.checkpoint.Set("10"); err != nil {
		t.Fatal(err)
	}
	if err := runProxy(t.Context(), streams{}, ck); err == nil || !strings.Contains(err.Error(), "--checkpoint-every needs --key") {
		t.Errorf("--checkpoint-every without --key: %v", err)
	}
	for _, bad := range []string{"/no-base", "//"} {
		o := &proxyOptions{listen: "127.0.0.1:0", upstream: "http://127.0.0.1:1/mcp", rotateEvery: "1h", durability: "strict", retain: "full", streamIdle: time.Minute, maxFrame: 1 << 20, maxSessions: 8, maxInflight: 1 << 20}
		o.redaction.pointers = []string{bad}
		if err := runProxy(t.Context(), streams{}, o); err == nil || !strings.Contains(err.Error(), "redact_bad_pointer") {
			t.Errorf("--redact %q: %v, want redact_bad_pointer", bad, err)
		}
	}
	remote := &proxyOptions{listen: "0.0.0.0:0", allowRemote: true, upstream: "http://127.0.0.1:1/mcp", rotateEvery: "1h", durability: "strict", retain: "full", streamIdle: time.Minute, maxFrame: 1 << 20, maxSessions: 8, maxInflight: 1 << 20}
	if err := runProxy(t.Context(), streams{}, remote); err == nil || !strings.Contains(err.Error(), "name the hosts") {
		t.Errorf("--allow-remote without --allowed-host: %v", err)
	}
	for _, o := range []*proxyOptions{{allowedOrigins: []string{"null"}}, {allowedHosts: []string{"http://x/"}}} {
		o.listen, o.upstream, o.rotateEvery, o.durability, o.retain, o.streamIdle, o.maxFrame, o.bundleDir = "127.0.0.1:0", "http://127.0.0.1:1/mcp", "1h", "strict", "full", time.Minute, 1<<20, t.TempDir()
		o.maxSessions, o.maxInflight = 8, 1<<20
		if err := runProxy(t.Context(), streams{}, o); err == nil || !strings.Contains(err.Error(), "allowed") {
			t.Errorf("hosts %q origins %q: %v, want refused", o.allowedHosts, o.allowedOrigins, err)
		}
	}
	badCapture := &proxyOptions{listen: "127.0.0.1:0", upstream: "http://127.0.0.1:1/mcp", rotateEvery: "1h", durability: "strict", retain: "full", streamIdle: time.Minute, maxFrame: 1 << 20, maxSessions: 8, maxInflight: 1 << 20, capture: "sometimes"}
	if err := runProxy(t.Context(), streams{}, badCapture); err == nil || !strings.Contains(err.Error(), `--capture "sometimes"`) {
		t.Errorf("--capture sometimes: %v", err)
	}
	for _, expr := range []string{"(", ""} {
		o := &proxyOptions{listen: "127.0.0.1:0", upstream: "http://127.0.0.1:1/mcp", rotateEvery: "1h", durability: "strict", retain: "full", streamIdle: time.Minute, maxFrame: 1 << 20, maxSessions: 8, maxInflight: 1 << 20, redactPaths: []string{expr}}
		if err := runProxy(t.Context(), streams{}, o); err == nil || !strings.Contains(err.Error(), "--redact-path") {
			t.Errorf("--redact-path %q: %v", expr, err)
		}
	}
	for _, o := range []*proxyOptions{{maxSessions: 0, maxInflight: 1}, {maxSessions: 1, maxInflight: 0}} {
		o.listen, o.upstream, o.rotateEvery, o.durability, o.retain, o.streamIdle, o.maxFrame = "127.0.0.1:0", "http://127.0.0.1:1/mcp", "1h", "strict", "full", time.Minute, 1<<20
		if err := runProxy(t.Context(), streams{}, o); err == nil || !strings.Contains(err.Error(), "must be positive") {
			t.Errorf("--max-sessions %d --max-inflight-bytes %d: %v", o.maxSessions, o.maxInflight, err)
		}
	}
	cmd := newProxyCmd(streams{}, func(context.Context, streams, *proxyOptions) error { return nil })
	if err := cmd.ParseFlags(nil); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"max-sessions": "256", "max-inflight-bytes": "268435456", "session-idle": "10m0s"} {
		if got := cmd.Flags().Lookup(name).DefValue; got != want {
			t.Errorf("--%s defaults to %s, want %s", name, got, want)
		}
	}
	if d, n, err := parseRotate("10m"); err != nil || d != 10*time.Minute || n != 0 {
		t.Fatalf("10m: %v %d %v", d, n, err)
	}
	if d, n, err := parseRotate("500"); err != nil || d != 0 || n != 500 {
		t.Fatalf("500: %v %d %v", d, n, err)
	}
	for _, bad := range []string{"0", "-3", "soon", "-1m"} {
		if _, _, err := parseRotate(bad); err == nil {
			t.Errorf("--rotate-every %q accepted", bad)
		}
	}
}
