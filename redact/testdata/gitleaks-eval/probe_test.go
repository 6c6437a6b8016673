package gitleakseval

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/redact"
	"github.com/zricethezav/gitleaks/v8/detect"
)

func jsonString(s string) string { b, _ := json.Marshal(s); return string(b) }

func toolsCall4K() []byte {
	var src strings.Builder
	for i := 0; src.Len() < 3400; i++ {
		fmt.Fprintf(&src, "func handler%d(w http.ResponseWriter, r *http.Request) { log.Printf(\"request %%d\", %d) }\n", i, i)
	}
	msg := `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"apply_patch","arguments":{` +
		`"path":"internal/server/handlers.go","content":` + jsonString(src.String()) + `,` +
		`"options":{"dryRun":false,"encoding":"utf-8","lineEndings":"lf","maxLines":4000,"labels":["refactor","http","logging"]},` +
		`"headers":{"Accept":"application/json","User-Agent":"agent/1.0","X-Request":"Bearer ` + gen(alnum, 40) + `"}},` +
		`"_meta":{"progressToken":"tok-42","traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}}`
	return []byte(msg)
}

func newDet(t testing.TB) *detect.Detector {
	t0 := time.Now()
	d, err := detect.NewDetectorDefaultConfig()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("NewDetectorDefaultConfig: %v, %d rules", time.Since(t0), len(d.Config.Rules))
	return d
}

func ids(d *detect.Detector, s string) []string {
	var out []string
	for _, f := range d.DetectString(s) {
		out = append(out, f.RuleID)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func TestCoverage(t *testing.T) {
	d := newDet(t)
	missed, total := 0, 0
	perClass := map[redact.Class][2]int{}
	for _, s := range samples() {
		total++
		got := ids(d, s.value)
		c := perClass[s.class]
		c[1]++
		if len(got) == 0 {
			missed++
			fmt.Printf("MISS %-22s %.60q\n", s.class, s.value)
		} else {
			c[0]++
			fmt.Printf("HIT  %-22s %v\n", s.class, got)
		}
		perClass[s.class] = c
	}
	fmt.Printf("gitleaks found %d of %d samples\n", total-missed, total)
	for _, c := range redact.Classes() {
		if v, ok := perClass[c]; ok {
			fmt.Printf("  %-22s %d/%d\n", c, v[0], v[1])
		}
	}
}

func TestFalsePositives(t *testing.T) {
	d := newDet(t)
	n := 0
	for _, s := range notSecrets() {
		if got := ids(d, s); len(got) > 0 {
			n++
			fmt.Printf("FP %v %.70q\n", got, s)
		}
	}
	fmt.Printf("gitleaks: %d of %d non-secrets flagged\n", n, len(notSecrets()))
	f, _ := os.Open("../everything-2026.8.31.jsonl")
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	lines, flagged, rfl := 0, 0, 0
	for sc.Scan() {
		lines++
		if got := ids(d, sc.Text()); len(got) > 0 {
			flagged++
			fmt.Printf("FP corpus line %d: %v\n", lines-1, got)
		}
		if r, _ := redact.Message(sc.Bytes(), nil); len(r.Redactions) > 0 {
			rfl++
		}
	}
	fmt.Printf("corpus: gitleaks flagged %d of %d lines; redact %d\n", flagged, lines, rfl)
}

// strings of a message, as a per-value redactor would scan them.
func stringsOf(msg []byte) []string {
	var v any
	json.Unmarshal(msg, &v)
	var out []string
	var walk func(any)
	walk = func(x any) {
		switch x := x.(type) {
		case string:
			out = append(out, x)
		case map[string]any:
			for k, e := range x {
				out = append(out, k)
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return out
}

func TestSpeed(t *testing.T) {
	d := newDet(t)
	msg := toolsCall4K()
	strs := stringsOf(msg)
	rules := redact.Default()
	const batch = 50
	var tp, tr, tg, tgw []time.Duration
	for range 40 {
		t0 := time.Now()
		for range batch {
			canon.Parse(msg, canon.ParseOptions{AllowDuplicateKeys: true})
		}
		t1 := time.Now()
		for range batch {
			redact.Message(msg, rules)
		}
		t2 := time.Now()
		for range batch {
			for _, s := range strs {
				d.DetectString(s)
			}
		}
		t3 := time.Now()
		for range batch {
			d.DetectBytes(msg)
		}
		t4 := time.Now()
		tp, tr, tg, tgw = append(tp, t1.Sub(t0)), append(tr, t2.Sub(t1)), append(tg, t3.Sub(t2)), append(tgw, t4.Sub(t3))
	}
	med := func(ds []time.Duration) float64 { slices.Sort(ds); return ds[len(ds)/2].Seconds() / batch * 1e6 }
	p, r, g, gw := med(tp), med(tr), med(tg), med(tgw)
	fmt.Printf("4 KiB tools/call (%d bytes, %d strings), µs/msg (median of 40 batches of %d):\n", len(msg), len(strs), batch)
	fmt.Printf("  canon.Parse (anchor)        %8.1f  1.0x\n", p)
	fmt.Printf("  redact.Message              %8.1f  %.1fx\n", r, r/p)
	fmt.Printf("  gitleaks per string value   %8.1f  %.1fx\n", g, g/p)
	fmt.Printf("  gitleaks whole message      %8.1f  %.1fx\n", gw, gw/p)
	fmt.Printf("  findings whole message: %v\n", ids(d, string(msg)))
	var all []string
	for _, s := range strs {
		all = append(all, ids(d, s)...)
	}
	fmt.Printf("  findings per string: %v\n", all)
}

func TestLeaksMemory(t *testing.T) {
	d := newDet(t)
	msg := toolsCall4K()
	for range 1000 {
		d.DetectBytes(msg)
	}
	fmt.Printf("after 1000 DetectBytes: d.Findings() holds %d findings\n", len(d.Findings()))
}

func TestHardNonSecrets(t *testing.T) {
	d := newDet(t)
	hard := []string{
		"cache_key=" + gen("0123456789abcdef", 32),
		"idempotency_key: 123e4567-e89b-12d3-a456-426614174000",
		"commit " + gen("0123456789abcdef", 40) + " by user",
		`{"etag": "W/\"` + gen(alnum, 32) + `\""}`,
		"request_id=" + gen(alnum, 32),
		"key = " + gen(alnum, 40),
		"x-amz-request-id: " + gen(upper+digits, 16),
		"token_count=" + gen(digits, 6),
		"The access token expires after 3600 seconds; refresh it with the refresh token.",
		"-----BEGIN CERTIFICATE-----\nMIIB" + gen(b64, 60),
	}
	for _, s := range hard {
		fmt.Printf("%-40.40q gitleaks=%v redact=%q\n", s, ids(d, s), mustClass(s))
	}
}

func mustClass(s string) string {
	r, err := redact.Message([]byte(jsonString(s)), nil)
	if err != nil || len(r.Redactions) == 0 {
		return ""
	}
	return string(r.Redactions[0].Class)
}
