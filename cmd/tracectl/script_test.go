package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestMain lets testscript run the real tracectl main as the command
// "tracectl" inside scripts, so CLI behaviour is tested end to end.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"tracectl": func() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) },
	})
}

// TestScripts runs every testdata/script/*.txtar. Each failure code of each
// command has a script that asserts its exit status.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:           "testdata/script",
		UpdateScripts: os.Getenv("TRACECTL_UPDATE_SCRIPTS") != "",
		Setup: func(env *testscript.Env) error {
			// Pass through where the npm test peer lives, if known.
			env.Setenv("TRACECTL_EVERYTHING_BIN", os.Getenv("TRACECTL_EVERYTHING_BIN"))
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exits":    cmdExits,
			"mkbundle": cmdMkBundle,
			"json":     cmdJSON,
			"jsoneq":   cmdJSONEq,
		},
	})
}

// cmdExits runs a command and asserts its exact exit status:
//
//	exits 3 tracectl verify bundle
//
// stdout and stderr are kept for the assertions that follow.
func cmdExits(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exits CODE command [args...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("exits: bad code %q", args[0])
	}
	got := 0
	if err := ts.Exec(args[1], args[2:]...); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			ts.Fatalf("exits: %v", err)
		}
		got = ee.ExitCode()
	}
	if got != want {
		ts.Fatalf("exit status %d, want %d", got, want)
	}
}

// cmdJSON asserts that a file (stdout, after cp) is one JSON object on one
// line and that members, named by a dotted path, hold the given JSON:
//
//	json out.json counts.attempts=2 signed=true bundle="b"
func cmdJSON(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 {
		ts.Fatalf("usage: json FILE [PATH=JSON...]")
	}
	doc := readJSONObject(ts, args[0])
	for _, a := range args[1:] {
		path, want, ok := strings.Cut(a, "=")
		if !ok {
			ts.Fatalf("json: %q is not PATH=JSON", a)
		}
		var w any
		if err := json.Unmarshal([]byte(want), &w); err != nil {
			ts.Fatalf("json: %s: %v", a, err)
		}
		if got := jsonAt(ts, doc, path); !reflect.DeepEqual(got, w) {
			ts.Fatalf("json %s: %s is %#v, want %#v", args[0], path, got, w)
		}
	}
}

// cmdJSONEq asserts that a member of one JSON file equals a member of
// another: `jsoneq seal.json counts.attempts verify.json counts.attempts`.
func cmdJSONEq(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 4 {
		ts.Fatalf("usage: jsoneq FILE1 PATH1 FILE2 PATH2")
	}
	a := jsonAt(ts, readJSONObject(ts, args[0]), args[1])
	b := jsonAt(ts, readJSONObject(ts, args[2]), args[3])
	if !reflect.DeepEqual(a, b) {
		ts.Fatalf("%s %s is %#v, %s %s is %#v", args[0], args[1], a, args[2], args[3], b)
	}
}

// readJSONObject decodes a file holding exactly one JSON object; the
// one-line form is required unless it is indented (verify's report).
func readJSONObject(ts *testscript.TestScript, name string) map[string]any {
	data := ts.ReadFile(name)
	dec := json.NewDecoder(strings.NewReader(data))
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		ts.Fatalf("%s: not a JSON object: %v", name, err)
	}
	if dec.More() {
		ts.Fatalf("%s: more than one JSON value", name)
	}
	if !strings.HasPrefix(data, "{\n") && strings.Count(strings.TrimSuffix(data, "\n"), "\n") > 0 {
		ts.Fatalf("%s: one JSON object on one line expected", name)
	}
	return doc
}

// jsonAt is the value at a dotted path of member names and array indexes.
func jsonAt(ts *testscript.TestScript, doc map[string]any, path string) any {
	var v any = doc
	for _, k := range strings.Split(path, ".") {
		switch c := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = c[k]; !ok {
				ts.Fatalf("json: %s: no member %q", path, k)
			}
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i < 0 || i >= len(c) {
				ts.Fatalf("json: %s: no element %q", path, k)
			}
			v = c[i]
		default:
			ts.Fatalf("json: %s: %q is not in an object or array", path, k)
		}
	}
	return v
}
