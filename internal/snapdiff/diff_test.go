package snapdiff

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tracectl/tracectl/snapshot"
)

// baseTools is a small catalog with the members drift must see.
var baseTools = []string{
	`{"name":"called","description":"the tool the agent used","inputSchema":{"type":"object","properties":{"x":{"type":"number","maximum":10}}}}`,
	`{"name":"uncalled","description":"never used","inputSchema":{"type":"object"}}`,
	`{"name":"structured","inputSchema":{"type":"object"},"outputSchema":{"type":"object","properties":{"celsius":{"type":"number"}}}}`,
	`{"name":"vendor","inputSchema":{"type":"object"},"_meta":{"com.example/owner":"team-a","com.example/rps":5},"annotations":{"destructiveHint":false}}`,
}

func catalog(t *testing.T, tools []string, split int) *snapshot.Snapshot {
	t.Helper()
	c2 := "p2"
	s, _ := collect(t, snapshot.Limits{},
		ex{listReq("1", nil), page("1", &c2, tools[:split]...)},
		ex{listReq("2", &c2), page("2", nil, tools[split:]...)})
	return s
}

func with(tools []string, i int, old, new string) []string {
	out := slices.Clone(tools)
	if !strings.Contains(out[i], old) {
		panic("with: " + old + " not in " + out[i])
	}
	out[i] = strings.Replace(out[i], old, new, 1)
	return out
}

func in(s *snapshot.Snapshot) Input { return Input{Manifest: s.Manifest, Load: snapshotLoader(s)} }

func TestDiff(t *testing.T) {
	base := catalog(t, baseTools, 2)
	tests := []struct {
		name    string
		new     []string
		split   int
		verdict string
		changes map[string]ToolDiff // tools not listed must be unchanged
	}{
		{"identical", baseTools, 2, VerdictIdentical, nil},
		{"other page split, key order, whitespace", []string{
			`{ "description" : "the tool the agent used", "name":"called", "inputSchema":{"properties":{"x":{"maximum":10.0,"type":"number"}},"type":"object"}}`,
			baseTools[1], baseTools[2], baseTools[3]}, 3, VerdictIdentical, nil},
		{"uncalled description", with(baseTools, 1, "never used", "now used"), 2, VerdictDrifted,
			map[string]ToolDiff{"uncalled": {Change: ChangeChanged, Members: []string{"/description"}}}},
		{"schema maximum", with(baseTools, 0, `"maximum":10`, `"maximum":11`), 2, VerdictDrifted,
			map[string]ToolDiff{"called": {Change: ChangeChanged, Members: []string{"/inputSchema/properties/x/maximum"}}}},
		{"outputSchema member", with(baseTools, 2, `"celsius":{"type":"number"}`, `"celsius":{"type":"integer"}`), 2, VerdictDrifted,
			map[string]ToolDiff{"structured": {Change: ChangeChanged, Members: []string{"/outputSchema/properties/celsius/type"}}}},
		{"_meta extension", with(baseTools, 3, `"com.example/owner":"team-a"`, `"com.example/owner":"team-b"`), 2, VerdictDrifted,
			map[string]ToolDiff{"vendor": {Change: ChangeChanged, Members: []string{"/_meta/com.example~1owner"}}}},
		{"annotation hint", with(baseTools, 3, `"destructiveHint":false`, `"destructiveHint":true`), 2, VerdictDrifted,
			map[string]ToolDiff{"vendor": {Change: ChangeChanged, Members: []string{"/annotations/destructiveHint"}}}},
		{"unknown member added", with(baseTools, 1, `"description"`, `"x-new":true,"description"`), 2, VerdictDrifted,
			map[string]ToolDiff{"uncalled": {Change: ChangeChanged, Members: []string{"/x-new"}}}},
		{"added and removed", []string{baseTools[0], baseTools[2], baseTools[3], tool("fresh")}, 2, VerdictDrifted,
			map[string]ToolDiff{"uncalled": {Change: ChangeRemoved}, "fresh": {Change: ChangeAdded}}},
		{"new side unsupported", with(baseTools, 1, `"type":"object"`, `"type":"object","type":"object"`), 2, VerdictIncomplete,
			map[string]ToolDiff{"uncalled": {Change: ChangeCannotCompare, Reason: cannotNewUnsupported}}},
		{"duplicate name", append(slices.Clone(baseTools), baseTools[1]), 2, VerdictIncomplete,
			map[string]ToolDiff{"uncalled": {Change: ChangeCannotCompare, Reason: cannotAmbiguousName}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := catalog(t, tt.new, tt.split)
			r := Diff(in(base), in(n))
			if r.Verdict != tt.verdict {
				t.Errorf("verdict %s, want %s: %+v", r.Verdict, tt.verdict, r.Tools)
			}
			for _, d := range r.Tools {
				want, ok := tt.changes[d.Name]
				if !ok {
					want = ToolDiff{Change: ChangeUnchanged}
				}
				want.Name = d.Name
				if !reflect.DeepEqual(d, want) {
					t.Errorf("%s: got %+v, want %+v", d.Name, d, want)
				}
			}
		})
	}
}

func TestDiffIncompleteSnapshot(t *testing.T) {
	base := catalog(t, baseTools, 2)
	c2 := "p2"
	partial, _ := collect(t, snapshot.Limits{}, ex{listReq("1", nil), page("1", &c2, baseTools[:2]...)})
	r := Diff(in(base), in(partial))
	if r.Verdict != VerdictIncomplete {
		t.Fatalf("verdict %s", r.Verdict)
	}
	for _, d := range r.Tools {
		switch d.Name {
		case "structured", "vendor":
			if d.Change != ChangeCannotCompare || d.Reason != cannotNewIncomplete {
				t.Errorf("%s: %+v (absent from an incomplete snapshot is not removed)", d.Name, d)
			}
		default:
			if d.Change != ChangeUnchanged {
				t.Errorf("%s: %+v", d.Name, d)
			}
		}
	}
	// A change found on the tools both sides have is still drift.
	changed, _ := collect(t, snapshot.Limits{}, ex{listReq("1", nil), page("1", &c2, with(baseTools, 1, "never", "ever")[:2]...)})
	if r := Diff(in(base), in(changed)); r.Verdict != VerdictDrifted {
		t.Errorf("verdict %s", r.Verdict)
	}
}

func TestDiffWithoutPages(t *testing.T) {
	base := catalog(t, baseTools, 2)
	n := catalog(t, with(baseTools, 1, "never used", "now used"), 2)
	r := Diff(Input{Manifest: base.Manifest}, Input{Manifest: n.Manifest})
	if r.Verdict != VerdictDrifted {
		t.Fatalf("verdict %s", r.Verdict)
	}
	for _, d := range r.Tools {
		if d.Name == "uncalled" && (d.Change != ChangeChanged || d.Members != nil || d.Reason == "") {
			t.Errorf("%+v", d)
		}
	}
}

func TestDiffMemberLimit(t *testing.T) {
	for _, tc := range []struct {
		changed   int
		truncated bool
	}{{maxChangedMembers, false}, {maxChangedMembers + 1, true}} {
		var a, b []string
		for i := range tc.changed {
			a = append(a, `"p`+itoa(i)+`":1`)
			b = append(b, `"p`+itoa(i)+`":2`)
		}
		old := catalog(t, []string{tool("x"), `{"name":"big","inputSchema":{` + strings.Join(a, ",") + `}}`}, 1)
		n := catalog(t, []string{tool("x"), `{"name":"big","inputSchema":{` + strings.Join(b, ",") + `}}`}, 1)
		for _, d := range Diff(in(old), in(n)).Tools {
			if d.Name == "big" && (len(d.Members) != maxChangedMembers || d.Truncated != tc.truncated) {
				t.Errorf("%d changed: members %d truncated %v", tc.changed, len(d.Members), d.Truncated)
			}
		}
	}
}
