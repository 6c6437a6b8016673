package redact

import (
	"bytes"
	"encoding/base64"
	"regexp"
	"sync"
)

// Class names a detector. classes are part of tracectl's contract: they are
// written into the redacted bytes ("[REDACTED:<class>]") and into the
// evidence's list of redactions, and are never renamed.
type Class string

// The built-in classes, in the order detectors are tried (the first that
// matches names the redaction), then the name and operator classes.
const (
	classPrivateKey      Class = "private_key"           // PEM "-----BEGIN ... PRIVATE KEY-----"
	classJWT             Class = "jwt"                   // eyJ....eyJ....sig
	classGitHubToken     Class = "github_token"          // ghp_ gho_ ghu_ ghs_ ghr_ github_pat_
	classGitLabToken     Class = "gitlab_token"          // glpat- and the other gl*- token prefixes
	classAnthropicKey    Class = "anthropic_api_key"     // sk-ant-
	classOpenAIKey       Class = "openai_api_key"        // sk-..., sk-proj-..., sk-svcacct-..., sk-admin-...
	classAWSAccessKeyID  Class = "aws_access_key_id"     // AKIA..., ASIA... (16 base32 characters)
	classAWSSecretKey    Class = "aws_secret_access_key" // 40 characters next to "aws ... secret", or beside an access key id
	classGoogleAPIKey    Class = "google_api_key"        // AIza + 35
	classSlackWebhook    Class = "slack_webhook"         // https://hooks.slack.com/services/...
	classSlackToken      Class = "slack_token"           // xoxa- xoxb- xoxp- xoxr- xoxs- xapp-
	classStripeKey       Class = "stripe_key"            // sk_live_ rk_live_ sk_test_ rk_test_
	classAuthorization   Class = "authorization"         // Bearer ..., Basic base64(user:pass), Authorization: ...
	classURLCredentials  Class = "url_credentials"       // scheme://user:password@host
	classSecretAssign    Class = "secret_assignment"     // password=..., api_key: ... inside free text
	classSecretName      Class = "secret_name"           // the value of a member, flag or variable whose name is secret-like
	classOperatorPointer Class = "operator_pointer"      // --redact POINTER
	classOperatorPattern Class = "operator_pattern"      // --redact-pattern REGEX
)

// classes lists every class, built-in detectors first, in detection order.
func classes() []Class {
	out := make([]Class, 0, len(detectors)+3)
	for _, d := range detectors {
		out = append(out, d.class)
	}
	return append(out, classSecretName, classOperatorPointer, classOperatorPattern)
}

// detector finds one credential shape in a string. keys are literal
// substrings at least one of which every match contains (ASCII, matched
// case-insensitively when fold is set): a cheap filter before the regular
// expression. valid, when set, checks a submatch the expression cannot.
type detector struct {
	class Class
	keys  []string
	fold  bool
	expr  string         // compiled into re on first use (compileDetectors)
	re    *regexp.Regexp // nil until then
	valid func(m []byte) bool
}

// compileDetectors compiles the detectors' expressions once, on first use,
// so that commands that never redact do not pay for them at start-up.
var compileDetectors = sync.OnceFunc(func() {
	for i := range detectors {
		detectors[i].re = regexp.MustCompile(detectors[i].expr)
	}
})

// minDetect is shorter than any string a built-in detector matches, so
// shorter strings (most of a JSON-RPC envelope) skip them all.
const minDetect = 12

var detectors = []detector{
	{class: classPrivateKey, keys: []string{"PRIVATE KEY"},
		expr: `-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----`},
	{class: classJWT, keys: []string{"eyJ"},
		expr: `\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*`},
	{class: classGitHubToken, keys: []string{"gh", "github_pat_"},
		expr: `\bgh[pousr]_[A-Za-z0-9]{36,255}\b|\bgithub_pat_[A-Za-z0-9_]{50,255}\b`},
	{class: classGitLabToken, keys: []string{"gl"},
		expr: `\bgl(?:pat|dt|rt|ptt|ft|soat|cbt|imt|agent)-[A-Za-z0-9_.-]{20,}`},
	{class: classAnthropicKey, keys: []string{"sk-ant-"},
		expr: `\bsk-ant-[A-Za-z0-9_-]{32,}`},
	{class: classOpenAIKey, keys: []string{"sk-"},
		expr: `\bsk-(?:(?:proj|svcacct|admin|None)-[A-Za-z0-9_-]{20,}|[A-Za-z0-9]{32,})\b`},
	{class: classAWSAccessKeyID, keys: []string{"AKIA", "ASIA", "ABIA", "ACCA", "A3T"},
		expr: `\b(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}\b`},
	{class: classAWSSecretKey, keys: []string{"aws", "amazon"}, fold: true,
		expr: `(?i)(?:aws|amazon)[a-z0-9_ .-]{0,20}secret[a-z0-9_ .-]{0,20}["']?\s*[:=]\s*["']?[A-Za-z0-9/+]{40}(?:[^A-Za-z0-9/+=]|$)`},
	{class: classGoogleAPIKey, keys: []string{"AIza"},
		expr: `\bAIza[0-9A-Za-z_-]{35}`},
	{class: classSlackWebhook, keys: []string{"hooks.slack.com"},
		expr: `hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/+-]{16,}`},
	{class: classSlackToken, keys: []string{"xox", "xapp-"},
		expr: `\bxox[abprs]-[0-9A-Za-z-]{10,}|\bxapp-[0-9]-[0-9A-Za-z-]{10,}`},
	{class: classStripeKey, keys: []string{"k_live_", "k_test_"},
		expr: `\b[sr]k_(?:live|test)_[0-9A-Za-z]{16,}`},
	{class: classAuthorization, keys: []string{"bearer", "basic", "authorization"}, fold: true,
		expr:  `(?i)(?:\bbearer\s+|\bbasic\s+|\bauthorization["']?\s*[:=]\s*["']?(?:[a-z]+\s+)?)([A-Za-z0-9._~+/-]{8,}=*)`,
		valid: credentialLike},
	{class: classURLCredentials, keys: []string{"://"},
		expr: `\b[A-Za-z][A-Za-z0-9+.-]*://[^\s/?#@:"']+:([^\s/?#@"']+)@[A-Za-z0-9.\[-]`},
	// Not "pwd": PWD=/home/user is the working directory in every
	// environment dump.
	{class: classSecretAssign, keys: []string{"pass", "secret", "key", "token"}, fold: true,
		expr:  `(?i)(?:^|[^a-z0-9])(?:password|passwd|passphrase|secret|client[_-]?secret|api[_-]?key|secret[_-]?key|private[_-]?key|access[_-]?token|auth[_-]?token|refresh[_-]?token)["']?\s*[:=]\s*["']?([^\s"'&,;]{6,})`,
		valid: notPlainWord},
}

// credentialLike accepts what follows Bearer/Basic/Authorization when it
// looks like a credential, not a word of prose ("Bearer authentication"):
// a Basic value that is base64 of "user:password", or a value with a digit
// and at least 12 characters, or one of at least 32.
func credentialLike(m []byte) bool {
	if dec, err := base64.StdEncoding.DecodeString(string(m)); err == nil && bytes.IndexByte(dec, ':') > 0 {
		return true
	}
	return len(m) >= 32 || (len(m) >= 12 && bytes.ContainsAny(m, "0123456789"))
}

// notPlainWord rejects a value of only lowercase letters ("password:
// required"), which prose has and passwords seldom do.
func notPlainWord(m []byte) bool {
	for _, c := range m {
		if c < 'a' || c > 'z' {
			return true
		}
	}
	return false
}

// scratch holds buffers reused across the strings of one message.
type scratch struct {
	text []byte // a decoded string value
}

// detect returns the class of the first built-in detector that finds a
// secret in s, or "".
func detect(s []byte, _ *scratch) Class {
	if len(s) < minDetect {
		return ""
	}
	hit := prefilter(s)
	if hit != 0 {
		compileDetectors()
	}
	for i := range detectors {
		if hit&(1<<i) == 0 {
			continue
		}
		d := &detectors[i]
		if d.valid == nil {
			if d.re.Match(s) {
				return d.class
			}
			continue
		}
		// One match at a time, so a hostile string of a million
		// near-misses costs linear time and no slice of all matches.
		for at := 0; at < len(s); {
			loc := d.re.FindSubmatchIndex(s[at:])
			if loc == nil {
				break
			}
			if g := loc[len(loc)-2:]; g[0] >= 0 && d.valid(s[at+g[0]:at+g[1]]) {
				return d.class
			}
			at += max(loc[1], 1)
		}
	}
	return ""
}

// trigger is one detector key, filed under its first byte (both letter
// cases for a fold key).
type trigger struct {
	key  string
	det  uint8
	fold bool
}

var triggers = func() (t [256][]trigger) {
	if len(detectors) > 64 {
		panic("redact: more detectors than prefilter bits")
	}
	for i, d := range detectors {
		for _, k := range d.keys {
			tr := trigger{key: k, det: uint8(i), fold: d.fold}
			t[k[0]] = append(t[k[0]], tr)
			if d.fold && 'a' <= k[0] && k[0] <= 'z' {
				t[k[0]-'a'+'A'] = append(t[k[0]-'a'+'A'], tr)
			}
		}
	}
	return t
}()

// prefilter returns the set of detectors (bit i for detectors[i]) one of
// whose keys s contains, in a single pass over s.
func prefilter(s []byte) uint64 {
	var hit uint64
	for i, c := range s {
		for _, t := range triggers[c] {
			if hit&(1<<t.det) != 0 || len(s)-i < len(t.key) {
				continue
			}
			if t.fold && hasPrefixFold(s[i:], t.key) || !t.fold && string(s[i:i+len(t.key)]) == t.key {
				hit |= 1 << t.det
			}
		}
	}
	return hit
}

// hasPrefixFold reports whether s starts with the lowercase ASCII key in
// any letter case.
func hasPrefixFold(s []byte, key string) bool {
	for j := 0; j < len(key); j++ {
		c := s[j]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != key[j] {
			return false
		}
	}
	return true
}

// awsSecretShape is a value that is exactly an AWS secret access key's
// shape: redacted when a sibling member holds an access key id.
var awsSecretShape = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9/+]{40}$`) })

// awsKeyIDLen is the length of every string awsKeyIDShape matches.
const awsKeyIDLen = 20

var awsKeyIDShape = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}$`)
})

// secretName reports whether a member, flag or variable name is
// secret-like: after dropping '-', '_' and '.' and lowering ASCII letters,
// it is "pass" or "pw", or ends with one of secretSuffixes and is not one
// of notSecretNames.
func secretName(name string) bool { return nameLooksSecret(name, true) }

// nameLooksSecret is secretName with the notSecretNames exemption applied
// only when exempt is set (Scan, which cannot tell a whole name from a
// piece of one, is the conservative side and applies none).
func nameLooksSecret[S ~string | ~[]byte](name S, exempt bool) bool {
	if len(name) > maxNameLen {
		return false
	}
	var buf [maxNameLen]byte
	n := 0
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '-' || c == '_' || c == '.':
			continue
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		}
		buf[n] = c
		n++
	}
	norm := buf[:n]
	if string(norm) == "pass" || string(norm) == "pw" {
		return true
	}
	for _, s := range secretSuffixes {
		if n >= len(s) && string(norm[n-len(s):]) == s {
			return !exempt || !notSecretNames[string(norm)]
		}
	}
	return false
}

// maxNameLen bounds the names secretName judges: longer ones are never
// secret-like (and cost nothing to skip).
const maxNameLen = 128

// secretSuffixes are normalized name endings: "db_password", "clientSecret",
// "X-Api-Key", "set-cookie", "AWS_SECRET_ACCESS_KEY" all end with one.
var secretSuffixes = []string{
	"password", "passwd", "passphrase", "secret", "secrets", "token", "apikey", "apikeys",
	"privatekey", "secretkey", "secretaccesskey", "cookie", "cookies", "authorization",
	"credential", "credentials",
}

// notSecretNames end like a secret but are protocol fields whose values are
// not credentials: MCP's progressToken, and pagination tokens.
var notSecretNames = map[string]bool{
	"progresstoken": true, "pagetoken": true, "nextpagetoken": true, "nexttoken": true,
	"continuationtoken": true, "resumptiontoken": true, "synctoken": true,
}
