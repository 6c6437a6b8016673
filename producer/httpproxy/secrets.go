package httpproxy

import (
	"io"
	"net/url"
	"regexp"
	"strings"

	"github.com/tracectl/tracectl/redact"
	"github.com/tracectl/tracectl/transcript"
)

// Secrets in what the proxy records about HTTP (spec/http.md, "Secrets in
// headers and URLs"): it records facts about requests, never the secrets
// hosted servers put in URLs and mirrored headers.

// pathMarker replaces a path segment that is not recorded.
const pathMarker = "[REDACTED:path]"

// minTokenSegment is the shortest path segment read as a key when it mixes
// letters and digits: hosted servers put keys in the path (/mcp/<key>/sse),
// and an id that is redacted too costs only a fact, never a secret.
const minTokenSegment = 16

// redactPath returns an escaped URL path with every segment that looks
// like a credential replaced by pathMarker: one the redaction rules find a
// secret in (redact.Scan: the built-in shapes, the operator's
// --redact-pattern), one an operator's --redact-path expression matches
// (unanchored, on the decoded segment), or a token: at least
// minTokenSegment bytes of letters, digits and -._~+= mixing letters and
// digits. With UnsafeRecordInClear the path is recorded as received.
func (p *Proxy) redactPath(escaped string) string {
	if p.cfg.UnsafeRecordInClear {
		return escaped
	}
	segs := strings.Split(escaped, "/")
	for i, s := range segs {
		if s == "" {
			continue
		}
		dec, err := url.PathUnescape(s)
		if err != nil {
			dec = s
		}
		if tokenLike(dec) || redact.Scan([]byte(dec), p.cfg.Redact) || matchAny(p.cfg.RedactPaths, dec) {
			segs[i] = pathMarker
		}
	}
	return strings.Join(segs, "/")
}

func matchAny(res []*regexp.Regexp, s string) bool {
	for _, re := range res {
		if re.MatchString(s) {
			return true
		}
	}
	return false
}

// tokenLike: a segment that reads as a generated key, not a word.
func tokenLike(s string) bool {
	if len(s) < minTokenSegment {
		return false
	}
	var letter, digit bool
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digit = true
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			letter = true
		case strings.IndexByte("-._~+=", c) >= 0:
		default:
			return false
		}
	}
	return letter && digit
}

// redactURL is an upstream URL (scheme, host, path) with its path redacted.
func (p *Proxy) redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	path := p.redactPath(u.EscapedPath())
	u.Path, u.RawPath = "", ""
	return u.String() + path
}

// ServerURL is the upstream as the proxy records it (the header's
// server.url, the upstream lines): scheme, host and path, with path
// segments that look like credentials redacted. A recorder Config.Open
// opens should name this URL as its server.
func (p *Proxy) ServerURL() string { return p.serverURL }

// paramValue is how an Mcp-Param-* value is recorded: by a digest under a
// fresh salt nobody keeps (it proves the header's presence and hides its
// value, even a short guessable one; the value is the argument's, which
// the frame commits to), or as received with UnsafeRecordInClear. ok false:
// no salt could be read, and nothing is recorded.
func (p *Proxy) paramValue(v string) (digest string, ok bool) {
	salt := make([]byte, transcript.SaltBytes)
	if _, err := io.ReadFull(p.cfg.Entropy, salt); err != nil {
		return "", false
	}
	return transcript.SaltedDigest(salt, []byte(v)), true
}
