package redact

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/tracectl/tracectl/canon"
)

func jsonString(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// locations are where a secret is put in a message: the message, the
// pointer of the redacted value, and the byte string to replace.
var locations = []struct {
	name, msg, pointer string
}{
	{"arguments", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fetch","arguments":{"q":%s,"n":3}}}`, "/params/arguments/q"},
	{"arguments-nested", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"list":[1,{"v":[%s]}]}}}`, "/params/arguments/list/1/v/0"},
	{"result", `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":%s}],"isError":false}}`, "/result/content/0/text"},
	{"structured", `{"jsonrpc":"2.0","id":1,"result":{"content":[],"structuredContent":{"env":{"HOME":"/root","X":%s}}}}`, "/result/structuredContent/env/X"},
	{"request-meta", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{},"_meta":{"k":%s}}}`, "/params/_meta/k"},
	{"result-meta", `{"jsonrpc":"2.0","id":1,"result":{"content":[],"_meta":{"k/~":%s}}}`, "/result/_meta/k~1~0"},
	{"error", `{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"failed","data":%s}}`, "/error/data"},
	{"notification", `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":%s}}`, "/params/data"},
}

// place puts tok (a JSON token) where msg has "%s".
func place(msg, tok string) string {
	i := bytes.Index([]byte(msg), []byte("%s"))
	return msg[:i] + tok + msg[i+2:]
}

func TestMessageEveryClassEveryLocation(t *testing.T) {
	for _, s := range samples() {
		for _, embed := range []string{"%s", "see: %s -- and more text"} {
			for _, loc := range locations {
				tok := jsonString(place(embed, s.value))
				in := place(loc.msg, tok)
				res, err := Message([]byte(in), nil)
				if err != nil {
					t.Fatalf("%s %s: %v", s.class, loc.name, err)
				}
				want := place(loc.msg, string(marker(s.class)))
				if string(res.Redacted) != want {
					t.Errorf("%s in %s (%q):\n got %s\nwant %s", s.class, loc.name, embed, res.Redacted, want)
					continue
				}
				if len(res.Redactions) != 1 || res.Redactions[0] != (Redaction{loc.pointer, s.class}) {
					t.Errorf("%s in %s: redactions %v, want [{%s %s}]", s.class, loc.name, res.Redactions, loc.pointer, s.class)
				}
				mustParse(t, res.Redacted)
			}
		}
	}
}

func mustParse(t *testing.T, b []byte) {
	t.Helper()
	if _, err := canon.Parse(b, canon.ParseOptions{AllowDuplicateKeys: true}); err != nil {
		t.Fatalf("output is not strict JSON: %v\n%s", err, b)
	}
	if !json.Valid(b) {
		t.Fatalf("encoding/json rejects the output: %s", b)
	}
}

// A secret written with escapes is found in the decoded text, and the
// whole token, escapes included, is replaced; bytes around it (odd
// whitespace, other escapes) are kept.
func TestMessageEscapesAndWhitespace(t *testing.T) {
	tok := "ghp_" + gen(alnum, 36)
	escaped := `"gh\u0070_` + tok[4:] + `"`
	in := "\r\n { \"jsonrpc\" : \"2.0\",\t\"id\" : 1 ,\n \"params\" : { \"arguments\" : { \"a\\u00e9\" : " + escaped + " , \"b\":\"caf\\u00e9\" } } }\n"
	res, err := Message([]byte(in), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Replace([]byte(in), []byte(escaped), marker(classGitHubToken), 1)
	if !bytes.Equal(res.Redacted, want) {
		t.Fatalf("got  %q\nwant %q", res.Redacted, want)
	}
	if got := res.Redactions; len(got) != 1 || got[0].Pointer != "/params/arguments/aé" {
		t.Fatalf("redactions %v", got)
	}
}

func TestMessageSecretNames(t *testing.T) {
	names := []string{"password", "Password", "db_password", "PASSWD", "secret", "client_secret", "clientSecret",
		"token", "access_token", "accessToken", "refresh-token", "api_key", "apiKey", "API-KEY", "x-api-key", "apikey",
		"cookie", "Cookie", "set-cookie", "authorization", "Authorization", "private_key", "privateKey",
		"aws_secret_access_key", "secretKey", "credentials", "passphrase", "pass", "PW"}
	for _, n := range names {
		for _, v := range []string{`"hunter2"`, `1234`, `{"user":"a","pass":"b"}`, `["a"]`, `"x"`} {
			in := `{"params":{"arguments":{` + jsonString(n) + `:` + v + `,"keep":"hunter2"}}}`
			res, err := Message([]byte(in), nil)
			if err != nil {
				t.Fatal(err)
			}
			want := `{"params":{"arguments":{` + jsonString(n) + `:"[REDACTED:secret_name]","keep":"hunter2"}}}`
			if string(res.Redacted) != want {
				t.Errorf("name %q value %s:\n got %s\nwant %s", n, v, res.Redacted, want)
			}
		}
	}
	// Values that hide nothing are kept, and so are names that only look
	// alike: MCP's progressToken, pagination tokens, token counts.
	keep := []string{
		`{"password":null,"token":true,"secret":false,"api_key":"","cookie":{},"credentials":[]}`,
		`{"params":{"_meta":{"progressToken":"abc-123"}},"result":{"nextPageToken":"Q1","pageToken":"Q2","nextToken":"Q3"}}`,
		`{"usage":{"max_tokens":1000,"total_tokens":12,"input_tokens":3,"tokenizer":"cl100k","token_count":5,"tokens":["a","b"]}}`,
		`{"secretName":"prod-db","passwordPolicy":"strong","tokenType":"Bearer","cookiePath":"/","keyId":"k1","author":"A","auth":"oauth2"}`,
	}
	for _, in := range keep {
		res, err := Message([]byte(in), nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Redactions) != 0 || string(res.Redacted) != in {
			t.Errorf("%s: redacted %v", in, res.Redactions)
		}
	}
}

// A tool's declared parameters named like secrets are schema, not data:
// tools/list keeps them; a value under the same name in data is redacted.
func TestMessageSchemaProperties(t *testing.T) {
	in := `{"result":{"tools":[{"name":"login","inputSchema":{"type":"object","properties":{` +
		`"password":{"type":"string","format":"password"},"api_key":{"type":"string","description":"your key"},` +
		`"token":{"$ref":"#/$defs/token"}},"required":["password"],"$defs":{"token":{"type":"string"}}}}]}}`
	res, err := Message([]byte(in), nil)
	if err != nil || len(res.Redactions) != 0 {
		t.Fatalf("schema redacted: %v %v", res.Redactions, err)
	}
	// A string under "properties" (GeoJSON, say) is data.
	in = `{"result":{"feature":{"properties":{"token":"abc","password":{"v":"x"}}}}}`
	res, err = Message([]byte(in), nil)
	if err != nil || len(res.Redactions) != 1 || res.Redactions[0].Pointer != "/result/feature/properties/token" {
		t.Fatalf("data under properties: %v %v", res.Redactions, err)
	}
}

// A name/value pair names its value: environment lists, header arrays.
func TestMessageNameValuePairs(t *testing.T) {
	in := `{"result":{"env":[{"name":"DB_PASSWORD","value":"hunter2"},{"name":"HOME","value":"/root"}],` +
		`"headers":[{"key":"X-Api-Key","value":{"v":1}},{"key":"Accept","value":"*/*"}],"other":{"name":"token","title":"t"}}}`
	res, err := Message([]byte(in), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"result":{"env":[{"name":"DB_PASSWORD","value":"[REDACTED:secret_name]"},{"name":"HOME","value":"/root"}],` +
		`"headers":[{"key":"X-Api-Key","value":"[REDACTED:secret_name]"},{"key":"Accept","value":"*/*"}],"other":{"name":"token","title":"t"}}}`
	if string(res.Redacted) != want {
		t.Fatalf("got  %s\nwant %s", res.Redacted, want)
	}
}

// An AWS secret access key has no prefix: it is redacted beside a member
// holding an access key id, and kept (as any 40-character string) alone.
func TestMessageAWSPair(t *testing.T) {
	id, sec := "AKIA"+gen(base32, 16), gen(b64, 40)
	in := `{"result":{"structuredContent":{"AccessKeyId":"` + id + `","Key":"` + sec + `","Region":"eu-west-1"}}}`
	res, err := Message([]byte(in), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"result":{"structuredContent":{"AccessKeyId":"[REDACTED:aws_access_key_id]","Key":"[REDACTED:aws_secret_access_key]","Region":"eu-west-1"}}}`
	if string(res.Redacted) != want {
		t.Fatalf("got  %s\nwant %s", res.Redacted, want)
	}
	// Escapes do not hide an access key id from the pairing.
	escaped := `{"AccessKeyId":"\u0041` + id[1:] + `","Key":"` + sec + `"}`
	res, err = Message([]byte(escaped), nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"AccessKeyId":"[REDACTED:aws_access_key_id]","Key":"[REDACTED:aws_secret_access_key]"}`; string(res.Redacted) != want {
		t.Fatalf("escaped id: got  %s\nwant %s", res.Redacted, want)
	}
	alone := `{"result":{"Key":"` + sec + `"}}`
	if res, _ := Message([]byte(alone), nil); len(res.Redactions) != 0 {
		t.Fatalf("a lone 40-character string was redacted: %v", res.Redactions)
	}
}

func TestMessageSorted(t *testing.T) {
	g := func() string { return jsonString("ghp_" + gen(alnum, 36)) }
	in := `{"z":` + g() + `,"a":[` + g() + `,` + g() + `],"m":{"password":"x"}}`
	res, err := Message([]byte(in), nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range res.Redactions {
		got = append(got, r.Pointer)
	}
	want := []string{"/a/0", "/a/1", "/m/password", "/z"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

func TestMessageFailsClosed(t *testing.T) {
	for in, code := range map[string]canon.Code{``: canon.CodeSyntax, `{`: canon.CodeSyntax, `{"a":1} {}`: canon.CodeTrailingData,
		`{"a":NaN}`: canon.CodeInvalidNumber, "\"\xff\"": canon.CodeInvalidUTF8, `[1,]`: canon.CodeSyntax} {
		_, err := Message([]byte(in), nil)
		var ce *canon.Error
		if !errors.Is(err, CodeInvalidMessage) || !errors.As(err, &ce) || !errors.Is(err, code) {
			t.Errorf("%q: err = %v, want %s wrapping canon's %s", in, err, CodeInvalidMessage, code)
		}
	}
	// Limits apply: depth and size.
	r, err := NewRules(Config{Limits: canon.Limits{MaxDepth: 3, MaxBytes: 64}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Message([]byte(`[[[1]]]`), r); err != nil {
		t.Errorf("depth 3 at MaxDepth 3: %v", err)
	}
	if _, err := Message([]byte(`[[[[1]]]]`), r); !errors.Is(err, canon.CodeDepthLimit) {
		t.Errorf("depth 4 at MaxDepth 3: %v", err)
	}
	if _, err := Message(bytes.Repeat([]byte(" "), 64), r); !errors.Is(err, canon.CodeSyntax) {
		t.Errorf("64 bytes at MaxBytes 64: %v, want a syntax error, not the size limit", err)
	}
	if _, err := Message(append(bytes.Repeat([]byte(" "), 64), '1'), r); !errors.Is(err, canon.CodeSizeLimit) {
		t.Errorf("65 bytes at MaxBytes 64: %v", err)
	}
	// A secret as a member name cannot be spliced away.
	tok := "ghp_" + gen(alnum, 36)
	_, err = Message([]byte(`{"result":{"`+tok+`":1}}`), nil)
	var e *Error
	if !errors.Is(err, CodeSecretInName) || !errors.As(err, &e) || e.Pointer != "/result" {
		t.Fatalf("secret in a name: %v", err)
	}
	if strings.Contains(err.Error(), tok[4:12]) {
		t.Fatalf("the error repeats the secret: %v", err)
	}
	// Nor does a parse error quote the input it failed on.
	for _, in := range []string{`{"a":1} {"t":"` + tok + `"}`, `{"` + tok + `":NaN}`, `{"t":"` + tok + `",}`} {
		_, err := Message([]byte(in), nil)
		if !errors.Is(err, CodeInvalidMessage) || strings.Contains(err.Error(), tok[4:12]) {
			t.Fatalf("%v", err)
		}
	}
	// A value to redact under a repeated name: its pointer would be
	// ambiguous. Repeated names elsewhere are fine.
	_, err = Message([]byte(`{"result":{"a":{"password":"p"},"a":{}}}`), nil)
	if !errors.Is(err, CodeAmbiguousPointer) || !errors.As(err, &e) || e.Pointer != "/result/a/password" {
		t.Fatalf("redaction under a repeated name: %v", err)
	}
	res, err := Message([]byte(`{"result":{"a":1,"a":2,"password":"p"},"params":{"password":"p"}}`), nil)
	if err != nil || len(res.Redactions) != 2 {
		t.Fatalf("repeated names beside a redaction: %v %v", res.Redactions, err)
	}
}

func TestMessageUnchangedIsInput(t *testing.T) {
	in := []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`)
	res, err := Message(in, nil)
	if err != nil || len(res.Redactions) != 0 || &res.Redacted[0] != &in[0] {
		t.Fatalf("nothing to redact: %v %v, want the input slice itself", res.Redactions, err)
	}
}

func TestIdempotent(t *testing.T) {
	r, err := NewRules(Config{Pointers: []string{"/arguments/obj", "/result/n"}, Patterns: []string{`internal-\d+`}})
	if err != nil {
		t.Fatal(err)
	}
	in := `{"params":{"arguments":{"obj":{"a":[1,2]},"s":"host internal-42","password":"p","k":` +
		jsonString("Bearer "+gen(alnum, 30)) + `}},"result":{"n":5}}`
	once, err := Message([]byte(in), r)
	if err != nil || len(once.Redactions) != 5 {
		t.Fatalf("first pass: %v %v", once.Redactions, err)
	}
	twice, err := Message(once.Redacted, r)
	if err != nil || len(twice.Redactions) != 0 || !bytes.Equal(twice.Redacted, once.Redacted) {
		t.Fatalf("second pass changed something: %v %v\n%s\n%s", twice.Redactions, err, once.Redacted, twice.Redacted)
	}
}

// corpus reads the real traffic of @modelcontextprotocol/server-everything
// 2026.8.31 (initialize, tools/list, tools/call of echo, get-tiny-image,
// get-sum, get-structured-content, get-annotated-message, resources and
// prompts), captured once from the npm package.
func corpus(t testing.TB) [][]byte {
	f, err := os.Open("testdata/everything-2026.8.31.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		out = append(out, bytes.Clone(sc.Bytes()))
	}
	if err := sc.Err(); err != nil || len(out) < 20 {
		t.Fatalf("corpus: %d lines, %v", len(out), err)
	}
	return out
}

func TestNoFalsePositivesRealTraffic(t *testing.T) {
	for i, line := range corpus(t) {
		res, err := Message(line, nil)
		if err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		if len(res.Redactions) != 0 {
			t.Errorf("line %d: redacted %v", i, res.Redactions)
		}
	}
}

func TestNoFalsePositivesCorpus(t *testing.T) {
	for _, s := range notSecrets() {
		in := `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":` + jsonString(s) + `}]}}`
		res, err := Message([]byte(in), nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Redactions) != 0 {
			t.Errorf("%q redacted as %s", s, res.Redactions[0].Class)
		}
		if c := detect([]byte(s), &scratch{}); c != "" {
			t.Errorf("detect(%q) = %s", s, c)
		}
	}
}

func TestEveryClassHasASample(t *testing.T) {
	seen := map[Class]bool{}
	for _, s := range samples() {
		seen[s.class] = true
	}
	for _, d := range detectors {
		if !seen[d.class] {
			t.Errorf("class %s has no sample", d.class)
		}
	}
	if n := len(classes()); n != len(detectors)+3 {
		t.Errorf("classes() has %d, want %d", n, len(detectors)+3)
	}
	for _, c := range classes() {
		var v canon.Value
		doc, err := canon.Parse(marker(c), canon.ParseOptions{})
		if err == nil {
			v = doc.Root()
		}
		if err != nil || !isMarker(v) || !argMarker(argMarkerOf(c)) {
			t.Errorf("marker of %s is not recognized as one: %v", c, err)
		}
	}
}

// Rules are shared by every frame of a session: Message and Argv may run
// concurrently on one *Rules (run with -race).
func TestConcurrentUse(t *testing.T) {
	r, err := NewRules(Config{Pointers: []string{"/arguments/a"}, Patterns: []string{`x\d`}})
	if err != nil {
		t.Fatal(err)
	}
	ss := samples()
	done := make(chan error)
	for g := range 4 {
		go func() {
			var err error
			for i := g; i < len(ss) && err == nil; i += 4 {
				in := `{"params":{"arguments":{"a":1,"b":` + jsonString(ss[i].value) + `}}}`
				var res Result
				res, err = Message([]byte(in), r)
				if err == nil && len(res.Redactions) != 2 {
					err = errors.New("want 2 redactions in " + in)
				}
				Argv([]string{"srv", ss[i].value}, r)
			}
			done <- err
		}()
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

// A string of many near-misses of a validated detector is still searched
// to its end: the credential after them is found.
func TestManyNearMisses(t *testing.T) {
	s := strings.Repeat("Bearer authentication ", 20000) + "Bearer " + gen(alnum, 40)
	if c := detect([]byte(s), &scratch{}); c != classAuthorization {
		t.Fatalf("got %q", c)
	}
	if c := detect([]byte(strings.Repeat("Bearer authentication ", 20000)), &scratch{}); c != "" {
		t.Fatalf("near-misses alone: %q", c)
	}
}

// Scan reads bytes that do not parse as any peer might: escapes decoded,
// quotes paired either way. What Message would hide in the whole message,
// Scan sees in a cut-off copy of it.
func TestScanSeesEscapes(t *testing.T) {
	key := "sk-ant-" + strings.Repeat("a", 40)
	for _, whole := range []string{
		`{"pass\u0077ord":"hunter2x"}`,
		`{"k":"\nsk-ant-\u0061` + key[8:] + `"}`,
		`{"\"param":[{"x":1,"\\\\password":7}]}`,
		`{"a:"x","password":"y"}`,
		`{"` + strings.Repeat("n", 90) + `_password":"y"}`,
		`{" pagetoken":"hunter2x"}`,          // not the exempt name: Message hides it
		`{"x\"pagetoken":"hunter2x"}`,        // nor is this
		"{\"\u00a0pagetoken\":\"hunter2x\"}", // a Unicode space is not trimmed by Message
	} {
		if res, err := Message([]byte(whole), nil); err == nil && len(res.Redactions) == 0 {
			t.Errorf("Message hides nothing in %s", whole)
		}
		cut := whole[:len(whole)-2]
		if !Scan([]byte(cut), nil) {
			t.Errorf("Scan sees nothing in %s", cut)
		}
	}
	if Scan([]byte(`{"query":"mcp \u0074ranscript","limit":10`), nil) {
		t.Error("Scan flags a frame with no secret")
	}
	// An operator's anchored pattern matches a string value whole: Scan
	// tries it on every quoted run, not only on the whole text.
	card, err := NewRules(Config{Patterns: []string{`^[0-9]{16}$`}})
	if err != nil {
		t.Fatal(err)
	}
	whole := `{"card":"4111111111111111","n":1}`
	if res, err := Message([]byte(whole), card); err != nil || len(res.Redactions) != 1 {
		t.Fatalf("Message with the pattern: %v %v", res.Redactions, err)
	}
	if !Scan([]byte(whole[:len(whole)-1]), card) {
		t.Error("Scan misses a value the operator's anchored pattern matches")
	}
}
