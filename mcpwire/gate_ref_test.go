package mcpwire

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/tracectl/tracectl/canon"
)

// readReference is the gate as it was before Read took its fast paths
// (one pass over the envelope, canonical ids recognized without encoding
// them, no value count under maxFrameValues bytes): the plain reading of
// the rules, kept so FuzzReadMatchesReference can hold Read to it.
func readReference(line []byte) (*Message, *Refusal) {
	body, term := SplitTerminator(line)
	if int64(len(body)) > MaxFrameBytes {
		return nil, &Refusal{Rule: RuleTooLarge, Detail: "over the gate's limit", ID: "null"}
	}
	if term == TermNone {
		return nil, &Refusal{Rule: ruleUnterminated, Detail: "no LF before the end of the stream", ID: readableID(body)}
	}
	if bytes.HasPrefix(body, bom) {
		return nil, &Refusal{Rule: ruleBOM, Detail: "a UTF-8 byte order mark at byte 0", ID: readableID(body[len(bom):])}
	}
	if i := bytes.IndexByte(body, '\r'); i >= 0 {
		return nil, &Refusal{Rule: ruleBareCR, Detail: "a CR at byte " + strconv.Itoa(i) + " that does not end the line", ID: "null"}
	}
	if n := valuesAtMost(body); n > maxFrameValues {
		return nil, &Refusal{Rule: ruleTooManyValues, Detail: "up to " + strconv.Itoa(n) + " JSON values, over the gate's " + strconv.Itoa(maxFrameValues), ID: "null"}
	}
	doc, err := canon.Parse(body, canon.ParseOptions{Limits: canon.Limits{MaxBytes: MaxFrameBytes, MaxDepth: MaxFrameDepth}})
	if err != nil {
		r := &Refusal{Rule: ruleInvalidJSON, ID: lenientID(body), Err: err}
		var ce *canon.Error
		if errors.As(err, &ce) {
			switch ce.Code {
			case canon.CodeDuplicateKey:
				r.Rule = ruleDuplicateMember
			case canon.CodeDepthLimit:
				r.Rule = ruleTooDeep
			case canon.CodeSizeLimit:
				r.Rule = RuleTooLarge
			}
			r.Detail = string(ce.Code) + " at byte " + strconv.Itoa(int(ce.Offset))
			if ce.Pointer != "" {
				r.Detail += " (" + bounded(ce.Pointer) + ")"
			}
		}
		return nil, r
	}
	root := doc.Root()
	switch root.Kind() {
	case canon.KindObject:
	case canon.KindArray:
		return nil, &Refusal{Rule: ruleBatch, Detail: "a JSON-RPC batch of " + strconv.Itoa(root.Len()) + " values", ID: "null"}
	default:
		return nil, &Refusal{Rule: ruleNotObject, Detail: "a JSON " + root.Kind().String(), ID: "null"}
	}
	id := readableIDOf(root)
	if name, want, ok := caseVariant(root, envelopeNames); ok {
		return nil, &Refusal{Rule: ruleCaseVariant, Detail: "member " + bounded(name) + " is not " + want, ID: id}
	}
	m := &Message{Body: body, Terminator: term, Root: root}
	if v, ok := root.Get(memberJSONRPC); !ok {
		return nil, &Refusal{Rule: ruleNotJSONRPC, Detail: "no jsonrpc member", ID: id}
	} else if s, _ := v.Str(); s != "2.0" {
		return nil, &Refusal{Rule: ruleNotJSONRPC, Detail: `jsonrpc is not "2.0"`, ID: id}
	}
	m.ID, _ = root.Get(memberID)
	if m.ID.Valid() {
		switch m.ID.Kind() {
		case canon.KindString, canon.KindNumber, canon.KindNull:
		default:
			return nil, &Refusal{Rule: ruleBadID, Detail: "id is a JSON " + m.ID.Kind().String(), ID: "null"}
		}
	}
	if _, isReq := root.Get(memberMethod); isReq && m.ID.Valid() && !referenceCanonicalID(m.ID) {
		// Servers match ids by value (the Go SDK through float64, Python
		// and JavaScript after unescaping): 7, 7.0 and 7e0, or "a" and
		// "\u0061", are one id to them and several to a matcher of exact
		// text, which would then bind one call's response to another.
		return nil, &Refusal{Rule: ruleBadID, Detail: "a request id not in canonical form (an integer within ±(2^53-1) written plainly, or a string with minimal escapes)", ID: "null"}
	}
	m.Params, _ = root.Get(memberParams)
	m.Result, _ = root.Get(memberResult)
	m.Error, _ = root.Get(memberError)
	if meth, ok := root.Get(memberMethod); ok {
		s, isStr := meth.Str()
		if !isStr {
			return nil, &Refusal{Rule: ruleBadMethod, Detail: "method is a JSON " + meth.Kind().String(), ID: id}
		}
		if m.Result.Valid() || m.Error.Valid() {
			return nil, &Refusal{Rule: ruleNotJSONRPC, Detail: "method together with result or error", ID: id}
		}
		m.Method = s
		m.Kind = KindNotification
		if m.ID.Valid() {
			m.Kind = KindRequest
		}
		if s == MethodToolsCall && m.Params.Kind() == canon.KindObject {
			if name, want, ok := caseVariant(m.Params, toolCallParams); ok {
				return nil, &Refusal{Rule: ruleCaseVariant, Detail: "params member " + bounded(name) + " is not " + want, ID: id}
			}
		}
		return m, nil
	}
	switch {
	case !m.ID.Valid():
		return nil, &Refusal{Rule: ruleNotJSONRPC, Detail: "neither method nor id", ID: id}
	case m.Result.Valid() == m.Error.Valid():
		return nil, &Refusal{Rule: ruleNotJSONRPC, Detail: "a response needs exactly one of result and error", ID: id}
	}
	m.Kind = KindResponse
	return m, nil
}

func referenceCanonicalID(id canon.Value) bool {
	c, err := id.Canonical(canon.PolicyV02)
	return err == nil && bytes.Equal(c, id.Raw())
}

// sameReading reports how got differs from the reference reading, or "".
func sameReading(gm *Message, gr *Refusal, wm *Message, wr *Refusal) string {
	switch {
	case (gm == nil) != (wm == nil) || (gr == nil) != (wr == nil):
		return "one accepted, the other refused: got " + describe(gm, gr) + ", want " + describe(wm, wr)
	case gr != nil:
		if gr.Rule != wr.Rule || gr.Detail != wr.Detail || gr.ID != wr.ID {
			return "refusal " + describe(gm, gr) + ", want " + describe(wm, wr)
		}
		var ge, we *canon.Error
		if errors.As(gr.Err, &ge) != errors.As(wr.Err, &we) || ge != nil && *ge != *we {
			return "refusal error " + strconv.Quote(errString(gr.Err)) + ", want " + strconv.Quote(errString(wr.Err))
		}
		return ""
	}
	if gm.Kind != wm.Kind || gm.Method != wm.Method || gm.Terminator != wm.Terminator || !bytes.Equal(gm.Body, wm.Body) {
		return "message " + describe(gm, gr) + ", want " + describe(wm, wr)
	}
	for _, v := range [][2]canon.Value{{gm.Root, wm.Root}, {gm.ID, wm.ID}, {gm.Params, wm.Params}, {gm.Result, wm.Result}, {gm.Error, wm.Error}} {
		if v[0].Valid() != v[1].Valid() || v[0].Offset() != v[1].Offset() || !bytes.Equal(v[0].Raw(), v[1].Raw()) {
			return "a member differs: " + strconv.Quote(string(v[0].Raw())) + ", want " + strconv.Quote(string(v[1].Raw()))
		}
	}
	return ""
}

func describe(m *Message, r *Refusal) string {
	if r != nil {
		return string(r.Rule) + " (" + r.Detail + ") id " + r.ID
	}
	return m.Kind.String() + " " + strconv.Quote(m.Method) + " id " + m.IDText()
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// FuzzReadMatchesReference: Read's fast paths change no verdict, no rule,
// no detail, no answer id and no member of the message it returns.
func FuzzReadMatchesReference(f *testing.F) {
	for _, tc := range hostile {
		f.Add([]byte(tc.frame))
	}
	for _, s := range referenceSeeds {
		f.Add([]byte(s))
	}
	// The differential fuzzer's corpus is hostile input too.
	files, _ := filepath.Glob("testdata/fuzz/FuzzGateDifferential/*")
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		if v, ok := corpusBytes(b); ok {
			f.Add(v)
		}
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		gm, gr := Read(line)
		wm, wr := readReference(line)
		if d := sameReading(gm, gr, wm, wr); d != "" {
			t.Fatalf("Read(%q): %s", line, d)
		}
	})
}

// corpusBytes reads the one []byte value of a go test fuzz v1 corpus file.
func corpusBytes(b []byte) ([]byte, bool) {
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	if len(lines) != 2 || !bytes.HasPrefix(lines[1], []byte("[]byte(")) || !bytes.HasSuffix(lines[1], []byte(")")) {
		return nil, false
	}
	s, err := strconv.Unquote(string(lines[1][len("[]byte(") : len(lines[1])-1]))
	if err != nil {
		return nil, false
	}
	return []byte(s), true
}

// referenceSeeds cover each fast path and its edge: ids at the edge of
// plain integer text, strings with and without escapes, jsonrpc and
// methods written with escapes, case variants before and after the
// members they vary.
var referenceSeeds = []string{
	call + "\n",
	call + "\r\n",
	`{"jsonrpc":"2.0","id":123456789012345,"method":"ping"}` + "\n",
	`{"jsonrpc":"2.0","id":1234567890123456,"method":"ping"}` + "\n",
	`{"jsonrpc":"2.0","id":9007199254740991,"method":"ping"}` + "\n",
	`{"jsonrpc":"2.0","id":-9007199254740991,"method":"ping"}` + "\n",
	`{"jsonrpc":"2.0","id":-0,"method":"ping"}` + "\n",
	`{"jsonrpc":"2.0","id":0,"method":"ping"}` + "\n",
	`{"jsonrpc":"2.0","id":-1,"method":"ping"}` + "\n",
	`{"jsonrpc":"2.0","id":01,"method":"ping"}` + "\n",
	`{"jsonrpc":"2.0","id":1e2,"method":"ping"}` + "\n",
	`{"jsonrpc":"2.0","id":"a\"b","method":"ping"}` + "\n",
	`{"jsonrpc":"2.0","id":"a\nb","method":"ping"}` + "\n",
	`{"jsonrpc":"2.0","id":"\u00e9","method":"ping"}` + "\n",
	`{"jsonrpc":"2.0","id":"é","method":"ping"}` + "\n",
	`{"jsonrpc":"2.0","id":"\/","method":"ping"}` + "\n",
	`{"jsonrpc":"2\u002e0","id":1,"method":"ping"}` + "\n",
	`{"jsonrpc":"2.00","id":1,"method":"ping"}` + "\n",
	`{"jsonrpc":2.0,"id":1,"method":"ping"}` + "\n",
	`{"jsonrpc":"2.0","id":1,"method":"tools\/call","params":{"name":"echo","Name":"x"}}` + "\n",
	`{"jsonrpc":"2.0","id":1,"method":"tools/list"}` + "\n",
	`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}` + "\n",
	`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1}}` + "\n",
	`{"Jsonrpc":"2.0","jsonrpc":"2.0","iD":1,"id":2,"method":"ping"}` + "\n",
	`{"jsonrpc":"2.0","id":2,"method":"ping","Id":1}` + "\n",
	`{"jsonrpc":"2.0","id":2,"method":"ping","PARAMS":{}}` + "\n",
	`{"jsonrpc":"2.0","id":1,"result":{},"Error":{}}` + "\n",
	`{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"x"}}` + "\n",
	`{"jsonrpc":"2.0","id":[1],"result":{}}` + "\n",
	`{"jsonrpc":"2.0","id":true,"method":"ping"}` + "\n",
	`{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"echo"}}` + "\n",
	`{"jsonrpc":"2.0","method":7}` + "\n",
	`{}` + "\n",
}

// TestReadMatchesReferenceOnSeeds runs the differential on the seeds in
// every plain test run, and fails if a seed stopped reaching the path it
// is there for.
func TestReadMatchesReferenceOnSeeds(t *testing.T) {
	all := append([]string{}, referenceSeeds...)
	for _, tc := range hostile {
		all = append(all, tc.frame)
	}
	for _, s := range all {
		gm, gr := Read([]byte(s))
		wm, wr := readReference([]byte(s))
		if d := sameReading(gm, gr, wm, wr); d != "" {
			t.Errorf("Read(%q): %s", s, d)
		}
	}
	// The fast paths agree with canon where they answer.
	for _, tc := range []struct {
		id   string
		want bool
	}{{"123456789012345", true}, {"-123456789012345", true}, {"0", true}, {"-0", false}, {"1.0", false}, {`"a"`, true}, {`"\u0061"`, false}, {`"\n"`, true}} {
		doc, err := canon.Parse([]byte(tc.id), canon.ParseOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := canonicalID(doc.Root()); got != tc.want || got != referenceCanonicalID(doc.Root()) {
			t.Errorf("canonicalID(%s) = %v, want %v (canon says %v)", tc.id, got, tc.want, referenceCanonicalID(doc.Root()))
		}
	}
}
