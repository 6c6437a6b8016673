package snapdiff

import "testing"

func TestDiffValues(t *testing.T) {
	base := catalog(t, baseTools, 2)
	newTools := with(with(baseTools, 3, `"com.example/owner":"team-a"`, `"com.example/owner":"team-b"`), 3, `"annotations":{"destructiveHint":false}`, `"annotations":{"destructiveHint":false,"x":[1,2]}`)
	cur := catalog(t, newTools, 2)
	r := Diff(in(base), in(cur))
	var vendor ToolDiff
	for _, d := range r.Tools {
		if d.Name == "vendor" {
			vendor = d
		}
	}
	got := Values(in(base), in(cur), vendor, 100)
	str := func(p *string) string {
		if p == nil {
			return "(absent)"
		}
		return *p
	}
	want := map[string][2]string{
		"/_meta/com.example~1owner": {`"team-a"`, `"team-b"`},
		"/annotations/x":            {"(absent)", `[1,2]`},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d values, want %d: %+v", len(got), len(want), got)
	}
	for _, v := range got {
		w, ok := want[v.Pointer]
		if !ok || str(v.Old) != w[0] || str(v.New) != w[1] || v.Truncated {
			t.Errorf("%s: old %s new %s truncated %v, want %v", v.Pointer, str(v.Old), str(v.New), v.Truncated, w)
		}
	}
	// The bound cuts a value and says so.
	if cut := Values(in(base), in(cur), vendor, 3); !cut[0].Truncated || len(*cut[0].New) != 3 {
		t.Errorf("bound 3: %+v", cut[0])
	}
	// Without page bytes, or for an unchanged tool, there are no values.
	if v := Values(Input{Manifest: base.Manifest}, in(cur), vendor, 100); v != nil {
		t.Errorf("without pages: %+v", v)
	}
	if v := Values(in(base), in(cur), ToolDiff{Name: "called", Change: ChangeUnchanged}, 100); v != nil {
		t.Errorf("unchanged: %+v", v)
	}
}
