package httpproxy

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/tracectl/tracectl/transcript"
)

// Who may talk to the proxy (spec/http.md, "Who may talk to it"). The proxy
// is the server a browser reaches: a page whose name rebinds to 127.0.0.1
// sends its own name as Host, and a page of another site sends its Origin.
// The proxy rewrites Host to the upstream's, so the upstream's own check
// cannot see either: the proxy refuses them first.

// Peer refusal rules (http.rule on a refused line without a frame).
const (
	ruleHostNotAllowed   = "host_not_allowed"
	ruleOriginNotAllowed = "origin_not_allowed"
)

// access is the parsed Host and Origin allow lists.
type access struct {
	hosts   map[string]bool // lower-case host names (any port)
	hostsAt map[string]bool // lower-case host:port
	origins map[string]bool // lower-case scheme://host[:port]
}

var errAccess = errors.New("httpproxy: bad allow list")

func newAccess(hosts, origins []string) (access, error) {
	a := access{hosts: map[string]bool{}, hostsAt: map[string]bool{}, origins: map[string]bool{}}
	for _, h := range hosts {
		h = strings.ToLower(strings.TrimSpace(h))
		if h == "" || strings.ContainsAny(h, "/?#@ ") {
			return a, fmt.Errorf("%w: allowed host %q: want HOST or HOST:PORT", errAccess, h)
		}
		if name, port, err := net.SplitHostPort(h); err == nil {
			if _, err := strconv.ParseUint(port, 10, 16); err != nil || name == "" {
				return a, fmt.Errorf("%w: allowed host %q: want HOST or HOST:PORT", errAccess, h)
			}
			a.hostsAt[net.JoinHostPort(name, port)] = true
			continue
		}
		a.hosts[strings.Trim(h, "[]")] = true
	}
	for _, o := range origins {
		o = strings.ToLower(strings.TrimSpace(o))
		if o == "null" {
			return a, fmt.Errorf("%w: allowed origin null: an opaque origin (a sandboxed frame, a file) is never allowed", errAccess)
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
			return a, fmt.Errorf("%w: allowed origin %q: want scheme://host[:port]", errAccess, o)
		}
		a.origins[u.Scheme+"://"+u.Host] = true
	}
	return a, nil
}

// check returns the rule that refuses r, and why, or "".
func (a access) check(r *http.Request) (rule, detail string) {
	if !a.hostAllowed(r) {
		return ruleHostNotAllowed, "Host " + strconv.Quote(bounded(r.Host)) + " is not the listen address, a loopback name or an allowed host"
	}
	vals, present := r.Header["Origin"]
	if !present {
		return "", ""
	}
	if len(vals) != 1 {
		return ruleOriginNotAllowed, "Origin given more than once"
	}
	o := strings.ToLower(strings.TrimSpace(vals[0]))
	if !a.origins[o] {
		return ruleOriginNotAllowed, "Origin " + strconv.Quote(bounded(vals[0])) + " is not allowed"
	}
	return "", ""
}

// hostAllowed: Host names the address the connection reached (its IP and
// port), a loopback name on that port, or an allowed host.
func (a access) hostAllowed(r *http.Request) bool {
	hp := strings.ToLower(r.Host)
	if hp == "" {
		return false
	}
	name, port, err := net.SplitHostPort(hp)
	if err != nil {
		name, port = strings.Trim(hp, "[]"), "80" // the proxy serves plain HTTP
	}
	if a.hosts[name] || a.hostsAt[net.JoinHostPort(name, port)] {
		return true
	}
	local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if local == nil {
		return false
	}
	lhost, lport, err := net.SplitHostPort(local.String())
	if err != nil || port != lport {
		return false
	}
	if name == "localhost" {
		return true
	}
	ip := net.ParseIP(name)
	return ip != nil && (ip.IsLoopback() || ip.Equal(net.ParseIP(lhost)))
}

// refusePeer records a request refused for its Host or Origin (its request
// line, then a refused line naming no frame: the body is not read) and
// answers 403. Nothing is forwarded; a recording failure changes nothing
// for the client.
func (p *Proxy) refusePeer(w http.ResponseWriter, r *http.Request, rule, detail string) {
	if b, err := p.bundleFor(r.Header.Get("Mcp-Session-Id"), ""); err == nil {
		x := &exchange{p: p, b: b, id: p.exch.Add(1), w: w, r: r}
		err := x.upstreamLine(nil)
		if err == nil {
			err = b.http(x.requestLine(nil))
		}
		if err == nil {
			_ = b.http(transcript.HTTPEvent{Event: transcript.HTTPRefused, Exchange: x.id, Rule: rule, Detail: detail})
		}
		b.release()
	}
	w.Header().Set("Connection", "close")
	writeRPCError(w, http.StatusForbidden, "null", codeRefused, "tracectl: refused: this request's "+map[string]string{ruleHostNotAllowed: "Host", ruleOriginNotAllowed: "Origin"}[rule]+" is not allowed ("+rule+")")
}
