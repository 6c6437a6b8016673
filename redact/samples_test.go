package redact

import (
	"encoding/base64"
	"math/rand/v2"
	"strings"
)

// Credential-shaped test values are generated, not written out, so secret
// scanners run over this repository do not flag them and no real
// credential can be pasted here by accident.

const (
	alnum  = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	upper  = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	base32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	b64    = alnum + "+/"
	digits = "0123456789"
)

var rng = rand.New(rand.NewPCG(16, 16))

// gen returns n characters from set; the first is one of set's digits when
// it has any, so every generated credential has a digit.
func gen(set string, n int) string {
	var b strings.Builder
	var ds []byte
	for _, c := range []byte(set) {
		if c >= '0' && c <= '9' {
			ds = append(ds, c)
		}
	}
	for i := range n {
		if i == 0 && len(ds) > 0 {
			b.WriteByte(ds[rng.IntN(len(ds))])
			continue
		}
		b.WriteByte(set[rng.IntN(len(set))])
	}
	return b.String()
}

type sample struct {
	class Class
	value string
}

// samples returns values of every built-in class, several shapes per class.
func samples() []sample {
	pem := func(kind string) string {
		return "-----BEGIN " + kind + "PRIVATE KEY-----\n" + gen(b64, 64) + "\n" + gen(b64, 64) + "\n-----END " + kind + "PRIVATE KEY-----\n"
	}
	jwtPart := func(json string) string { return base64.RawURLEncoding.EncodeToString([]byte(json)) }
	return []sample{
		{classPrivateKey, pem("")},
		{classPrivateKey, pem("RSA ")},
		{classPrivateKey, pem("EC ")},
		{classPrivateKey, pem("OPENSSH ")},
		{classPrivateKey, "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n" + gen(b64, 64)},
		{classJWT, jwtPart(`{"alg":"HS256","typ":"JWT"}`) + "." + jwtPart(`{"sub":"1234567890","name":"A","iat":1516239022}`) + "." + gen(alnum+"-_", 43)},
		{classJWT, jwtPart(`{"alg":"none"}`) + "." + jwtPart(`{"sub":"admin","exp":99}`) + "."},
		{classGitHubToken, "ghp_" + gen(alnum, 36)},
		{classGitHubToken, "gho_" + gen(alnum, 36)},
		{classGitHubToken, "ghu_" + gen(alnum, 36)},
		{classGitHubToken, "ghs_" + gen(alnum, 36)},
		{classGitHubToken, "ghr_" + gen(alnum, 36)},
		{classGitHubToken, "github_pat_" + gen(alnum, 22) + "_" + gen(alnum, 59)},
		{classGitLabToken, "glpat-" + gen(alnum, 20)},
		{classGitLabToken, "glpat-" + gen(alnum+"-_", 27) + ".01." + gen(alnum, 9)},
		{classAnthropicKey, "sk-ant-api03-" + gen(alnum+"-_", 93) + "AA"},
		{classAnthropicKey, "sk-ant-admin01-" + gen(alnum+"-_", 93) + "AA"},
		// Real OpenAI keys carry "T3BlbkFJ" (base64 of "OpenAI") in the middle.
		{classOpenAIKey, "sk-" + gen(alnum, 20) + "T3BlbkFJ" + gen(alnum, 20)},
		{classOpenAIKey, "sk-proj-" + gen(alnum+"-_", 74) + "T3BlbkFJ" + gen(alnum+"-_", 74)},
		{classOpenAIKey, "sk-svcacct-" + gen(alnum+"-_", 58) + "T3BlbkFJ" + gen(alnum+"-_", 58)},
		{classOpenAIKey, "sk-admin-" + gen(alnum+"-_", 58) + "T3BlbkFJ" + gen(alnum+"-_", 58)},
		{classAWSAccessKeyID, "AKIA" + gen(base32, 16)},
		{classAWSAccessKeyID, "ASIA" + gen(base32, 16)},
		{classAWSSecretKey, "aws_secret_access_key = " + gen(b64, 40)},
		{classAWSSecretKey, `AWS_SECRET_ACCESS_KEY="` + gen(b64, 40) + `"`},
		{classGoogleAPIKey, "AIza" + gen(alnum+"-_", 35)},
		{classSlackWebhook, "https://hooks.slack.com/services/T" + gen(upper+digits, 8) + "/B" + gen(upper+digits, 10) + "/" + gen(alnum, 24)},
		{classSlackToken, "xoxb-" + gen(digits, 12) + "-" + gen(digits, 13) + "-" + gen(alnum, 24)},
		{classSlackToken, "xoxp-" + gen(digits, 12) + "-" + gen(digits, 12) + "-" + gen(digits, 13) + "-" + gen("abcdef0123456789", 32)},
		{classSlackToken, "xoxa-2-" + gen(alnum, 30)},
		{classSlackToken, "xoxr-" + gen(alnum, 30)},
		{classSlackToken, "xoxs-" + gen(digits, 10) + "-" + gen(digits, 11) + "-" + gen(digits, 12) + "-" + gen("abcdef0123456789", 64)},
		{classSlackToken, "xapp-1-A" + gen(upper+digits, 10) + "-" + gen(digits, 13) + "-" + gen("abcdef0123456789", 64)},
		{classStripeKey, "sk_live_" + gen(alnum, 24)},
		{classStripeKey, "rk_live_" + gen(alnum, 24)},
		{classStripeKey, "sk_test_" + gen(alnum, 24)},
		{classAuthorization, "Bearer " + gen(alnum, 40)},
		{classAuthorization, "bearer " + gen(alnum+".-_", 20)},
		{classAuthorization, "Basic " + base64.StdEncoding.EncodeToString([]byte("admin:"+gen(alnum, 6)))},
		{classAuthorization, "Authorization: token " + gen("abcdef0123456789", 40)},
		{classURLCredentials, "postgres://admin:" + gen(alnum, 12) + "@db.internal:5432/app"},
		{classURLCredentials, "https://user:" + gen(alnum, 10) + "@example.com/path"},
		{classSecretAssign, "password=hunter2"},
		{classSecretAssign, "login with api_key: " + gen(alnum, 24)},
		{classSecretAssign, `{"client_secret": "` + gen(alnum, 30) + `"}`},
	}
}

// notSecrets must never be redacted: what MCP traffic is full of.
func notSecrets() []string {
	hex := func(n int) string { return gen("0123456789abcdef", n) }
	png := base64.StdEncoding.EncodeToString(append([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), []byte(gen(alnum, 600))...))
	return []string{
		"tools/call", "tools/list", "notifications/tools/list_changed", "resources/read", "prompts/get",
		"notifications/progress", "notifications/cancelled", "completion/complete", "logging/setLevel",
		"2.0", "2025-11-25", "hello", "Echo: hello",
		"The quick brown fox jumps over the lazy dog, twelve times over.",
		"Use a bearer token in the Authorization header.", "Basic authentication is not supported",
		"Bearer authentication", "the password: required", "password reset link sent", "set your api_key first",
		"Tokens used: 1024 of 4096", "max_tokens must be at least 16",
		"123e4567-e89b-12d3-a456-426614174000", "550E8400-E29B-41D4-A716-446655440000",
		hex(64), "sha256:" + hex(64), hex(40), hex(32),
		png, "data:image/png;base64," + png,
		"https://example.com/path?query=1&page=2", "https://github.com/modelcontextprotocol/go-sdk",
		"mailto:someone@example.com", "user@example.com", "git@github.com:tracectl/tracectl.git",
		"@modelcontextprotocol/server-everything", "scikit-learn", "sk-learn",
		"task-" + gen(alnum, 40), "disk-" + gen(alnum, 40), "risk-assessment-for-quarterly-report-2026",
		"ghp_short", "AKIAEXAMPLE", "AIzaSy", "xoxb-12", "sk_live_", "glpat-short",
		"eyJwYWdlIjogMn0=", "eyJhbGciOiJIUzI1NiJ9", // a base64 cursor; a lone JWT header
		"-----BEGIN CERTIFICATE-----\nMIIB" + gen(b64, 60) + "\n-----END CERTIFICATE-----",
		"-----BEGIN PUBLIC KEY-----\nMIIB" + gen(b64, 60) + "\n-----END PUBLIC KEY-----",
		"tracectl-20261201T185113.123Z-" + hex(8) + ".trace",
		"/home/user/.local/state/tracectl/bundles", `C:\Users\user\AppData`,
		"数据 données поиск файлов 🚀", "Größe über naïve résumé",
		// An environment dump, as server-everything's get-env returns.
		`{"PWD":"/home/user","HOME":"/root","PATH":"/usr/local/bin:/usr/bin:/bin","SHELL":"/bin/bash","LANG":"C.UTF-8","TERM":"xterm-256color","NODE_VERSION":"24.22.3","HOSTNAME":"4f1c2e9a7b3d"}`,
		"PWD=/home/user\nOLDPWD=/tmp\nSHLVL=1\n_=/usr/bin/env",
	}
}
