// Package policy decides whether a tools/call may reach its server: an
// operator's policy file (ordered rules, a tool name or glob and an optional
// CEL condition each, first match wins) and a lockfile of pinned tool
// declarations (spec/policy.md). The same code decides at the gate (the
// producer's session core) and again offline (verify), from the same
// inputs: the exact request the gate read and the declarations of the
// snapshot the call bound. A decision is a pure function of those inputs,
// the policy bytes and the lock bytes, so a verifier re-derives it.
//
// Evaluation never allows by accident: a condition that fails to evaluate
// (a missing argument, a type error, the cost limit) denies the call under
// the rule that failed, whatever that rule's action.
package policy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
	"go.yaml.in/yaml/v3"

	"github.com/tracectl/tracectl/canon"
)

// Actions and the reserved rule ids.
const (
	Allow = "allow"
	Deny  = "deny"
	// RuleDefault is the rule id of a decision no rule matched: the
	// policy's default action.
	RuleDefault = "default"
	// RulePin is the rule id of a decision the lockfile made.
	RulePin = "pin"
)

// Modes a policy is in force under (recorded in the transcript header).
const (
	ModeEnforce = "enforce" // a denied call is not forwarded
	ModeAudit   = "audit"   // every call is decided and recorded, and forwarded anyway (shadow)
)

// Limits. A policy is written by hand: these leave ample room and keep
// parsing and compiling bounded.
const (
	MaxPolicyBytes = 1 << 20 // a policy file
	MaxRules       = 1000    // rules in one policy
	MaxWhenBytes   = 4096    // one CEL condition
	maxIDBytes     = 64      // a rule id
	// CostLimit bounds the CEL runtime cost of evaluating one rule's
	// condition for one call (cel.CostLimit): a condition over it denies
	// the call. Ordinary conditions over a call's arguments cost under 100.
	CostLimit = 10_000
	// MaxReasonBytes bounds a decision's reason.
	MaxReasonBytes = 512
)

// ErrPolicy is wrapped by every error Parse returns.
var ErrPolicy = errors.New("invalid policy")

// Error is a policy file error: the rule (its 0-based index and id, when
// the error is in a rule) and the line and column in the file.
type Error struct {
	Rule   int    // -1 when not in a rule
	ID     string // the rule's id, when it has one
	Line   int    // 1-based, 0 when unknown
	Column int    // 1-based, 0 when unknown
	Detail string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(ErrPolicy.Error())
	if e.Line > 0 {
		fmt.Fprintf(&b, " at line %d", e.Line)
		if e.Column > 0 {
			fmt.Fprintf(&b, ", column %d", e.Column)
		}
	}
	if e.Rule >= 0 {
		fmt.Fprintf(&b, ": rule %d", e.Rule)
		if e.ID != "" {
			fmt.Fprintf(&b, " (%q)", e.ID)
		}
	}
	b.WriteString(": ")
	b.WriteString(e.Detail)
	return b.String()
}

func (e *Error) Unwrap() error { return ErrPolicy }

// Policy is a parsed, compiled policy file.
type Policy struct {
	def   string
	rules []rule
}

type rule struct {
	id     string
	tool   string // "" = any tool
	glob   bool
	prefix string // a glob's literal prefix: a name without it cannot match
	action string
	prg    cel.Program // nil: no condition
	// partial is prg compiled for partial evaluation with the arguments
	// unknown (plan.go); nil for a metered condition, which is never folded.
	partial cel.Program
	// native is the condition compiled to Go (native.go), or nil.
	native *native
}

// file and fileRule are the policy file's shape (spec/policy.md).
type file struct {
	Version *int       `yaml:"version"`
	Default string     `yaml:"default"`
	Rules   []fileRule `yaml:"rules"`
}

type fileRule struct {
	ID     string  `yaml:"id"`
	Tool   *string `yaml:"tool"`
	When   *string `yaml:"when"`
	Action string  `yaml:"action"`
}

var idRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// Parse reads a policy file (YAML, or JSON, which is YAML too) strictly:
// one document, no unknown member, no repeated key, version 1, and every
// rule compiled and type-checked (its condition must be a CEL bool
// expression over args, tool, server and declaration). Errors are *Error.
func Parse(data []byte) (*Policy, error) {
	if len(data) > MaxPolicyBytes {
		return nil, &Error{Rule: -1, Detail: fmt.Sprintf("%d bytes, limit %d", len(data), MaxPolicyBytes)}
	}
	var f file
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &Error{Rule: -1, Detail: "empty policy"}
		}
		return nil, yamlError(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, &Error{Rule: -1, Detail: "more than one YAML document"}
	}
	// The node tree gives each rule's position for errors.
	var root yaml.Node
	_ = yaml.Unmarshal(data, &root)
	pos := rulePositions(&root)
	switch {
	case f.Version == nil:
		return nil, &Error{Rule: -1, Detail: "version is missing (want 1)"}
	case *f.Version != 1:
		return nil, &Error{Rule: -1, Detail: fmt.Sprintf("version %d is not supported (want 1)", *f.Version)}
	case f.Default != Allow && f.Default != Deny:
		return nil, &Error{Rule: -1, Detail: fmt.Sprintf("default %q: want allow or deny", f.Default)}
	case len(f.Rules) > MaxRules:
		return nil, &Error{Rule: -1, Detail: fmt.Sprintf("%d rules, limit %d", len(f.Rules), MaxRules)}
	}
	env, err := newEnv()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPolicy, err)
	}
	p := &Policy{def: f.Default, rules: make([]rule, 0, len(f.Rules))}
	seen := map[string]bool{}
	for i, fr := range f.Rules {
		at := func(detail string) *Error {
			e := &Error{Rule: i, ID: fr.ID, Detail: detail}
			if i < len(pos) {
				e.Line, e.Column = pos[i][0], pos[i][1]
			}
			return e
		}
		switch {
		case fr.ID == "":
			return nil, at("id is missing")
		case len(fr.ID) > maxIDBytes || !idRE.MatchString(fr.ID):
			return nil, at(fmt.Sprintf("id must be 1..%d of A-Z a-z 0-9 . _ -, starting with a letter or digit", maxIDBytes))
		case fr.ID == RuleDefault || fr.ID == RulePin:
			return nil, at(fmt.Sprintf("id %q is reserved", fr.ID))
		case seen[fr.ID]:
			return nil, at("id repeats an earlier rule's")
		case fr.Action != Allow && fr.Action != Deny && fr.Action != Approve:
			return nil, at(fmt.Sprintf("action %q: want allow, deny or approve", fr.Action))
		}
		seen[fr.ID] = true
		r := rule{id: fr.ID, action: fr.Action}
		if fr.Tool != nil {
			if *fr.Tool == "" {
				return nil, at("tool is empty (omit it to match any tool)")
			}
			if _, err := path.Match(*fr.Tool, ""); err != nil {
				return nil, at(fmt.Sprintf("tool %q is not a valid glob", *fr.Tool))
			}
			r.tool, r.glob = *fr.Tool, strings.ContainsAny(*fr.Tool, `*?[\`)
			if r.glob {
				r.prefix = r.tool[:strings.IndexAny(r.tool, `*?[\`)]
			}
		}
		if fr.When != nil {
			prg, partial, nat, err := compile(env, *fr.When)
			if err != nil {
				return nil, at(err.Error())
			}
			r.prg, r.partial, r.native = prg, partial, nat
		}
		p.rules = append(p.rules, r)
	}
	return p, nil
}

// yamlError turns a YAML decoding error (a repeated key, an unknown
// member, a type mismatch) into an *Error with its line.
func yamlError(err error) *Error {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "yaml: ")
	e := &Error{Rule: -1, Detail: msg}
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msg = strings.TrimPrefix(te.Errors[0], "yaml: ")
		e.Detail = msg
	}
	var line int
	if n, _ := fmt.Sscanf(msg, "line %d:", &line); n == 1 {
		e.Line = line
		if i := strings.Index(msg, ": "); i >= 0 {
			e.Detail = msg[i+2:]
		}
	}
	return e
}

func rulePositions(root *yaml.Node) [][2]int {
	if root.Kind != yaml.DocumentNode || len(root.Content) != 1 || root.Content[0].Kind != yaml.MappingNode {
		return nil
	}
	m := root.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == "rules" && m.Content[i+1].Kind == yaml.SequenceNode {
			var out [][2]int
			for _, n := range m.Content[i+1].Content {
				out = append(out, [2]int{n.Line, n.Column})
			}
			return out
		}
	}
	return nil
}

// HasRule reports whether id names a rule of p, or the default.
func (p *Policy) HasRule(id string) bool {
	if id == RuleDefault {
		return true
	}
	for _, r := range p.rules {
		if r.id == id {
			return true
		}
	}
	return false
}

func newEnv() (*cel.Env, error) {
	dyn := cel.MapType(cel.StringType, cel.DynType)
	return cel.NewEnv(
		cel.Variable("args", dyn),
		cel.Variable("tool", cel.StringType),
		cel.Variable("server", dyn),
		cel.Variable("declaration", dyn),
	)
}

func compile(env *cel.Env, expr string) (prg, partial cel.Program, nat *native, err error) {
	if len(expr) > MaxWhenBytes {
		return nil, nil, nil, fmt.Errorf("when: %d bytes, limit %d", len(expr), MaxWhenBytes)
	}
	ast, iss := env.Compile(expr)
	if iss != nil && iss.Err() != nil {
		errs := iss.Errors()
		if len(errs) > 0 {
			e := errs[0]
			return nil, nil, nil, fmt.Errorf("when: CEL error at %d:%d: %s", e.Location.Line(), e.Location.Column()+1, e.Message)
		}
		return nil, nil, nil, fmt.Errorf("when: %v", iss.Err())
	}
	if !ast.OutputType().IsExactType(cel.BoolType) && !ast.OutputType().IsExactType(cel.DynType) {
		return nil, nil, nil, fmt.Errorf("when: the condition is %s, want bool", ast.OutputType())
	}
	opts := []cel.ProgramOption{cel.EvalOptions(cel.OptOptimize)}
	// Metering costs more than most conditions (about half of a call's
	// decision): a condition whose worst case over any input the gate
	// admits is within linearCost is evaluated unmetered; any other (a
	// comprehension over the arguments, say) is metered and stopped at
	// CostLimit, and never folded (plan.go).
	metered := false
	if est, err := env.EstimateCost(ast, inputSizes{}); err != nil || est.Max > linearCost {
		opts = append(opts, cel.CostLimit(CostLimit))
		metered = true
	}
	if prg, err = env.Program(ast, opts...); err != nil {
		return nil, nil, nil, fmt.Errorf("when: %w", err)
	}
	if !metered {
		if partial, err = env.Program(ast, cel.EvalOptions(cel.OptOptimize, cel.OptPartialEval)); err != nil {
			return nil, nil, nil, fmt.Errorf("when: %w", err)
		}
		nat = compileNative(ast.NativeRep())
	}
	return prg, partial, nat, nil
}

// maxInputBytes bounds any string, list or map a condition reads: a
// request frame (mcpwire.MaxFrameBytes) or a tools/list page
// (snapshot.CeilingMaxPageBytes), whichever is larger.
const maxInputBytes = 64 << 20

// linearCost is the worst-case cost under which a condition is not metered:
// a few passes over the largest input.
const linearCost = 8 * maxInputBytes

// inputSizes estimates every unknown size as anything up to maxInputBytes.
type inputSizes struct{}

func (inputSizes) EstimateSize(checker.AstNode) *checker.SizeEstimate {
	return &checker.SizeEstimate{Min: 0, Max: maxInputBytes}
}

func (inputSizes) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}

// Decision is what a policy or lock decided for one call.
type Decision struct {
	Action string // Allow, Deny or Approve
	Rule   string // the rule's id, RuleDefault, or RulePin
	Reason string // why, when the rule alone does not say: drifted fields, an evaluation error
}

// activation is the CEL variables for one call, resolved without a map.
type activation struct {
	tool              ref.Val
	args, server, dec ref.Val
	raw               canon.Value // the arguments, until args is read
}

func (a *activation) ResolveName(name string) (any, bool) {
	switch name {
	case "tool":
		return a.tool, true
	case "args":
		if a.args == nil {
			// Converted once, when a condition first reads it.
			a.args = emptyMap
			if a.raw.Valid() {
				a.args = jsonValue(a.raw)
			}
		}
		return a.args, true
	case "server":
		return a.server, true
	case "declaration":
		return a.dec, true
	}
	return nil, false
}

func (a *activation) Parent() interpreter.Activation { return nil }

// decide evaluates p's rules in order for one call: through the plan of
// the call's tool in its snapshot when there is one (plan.go), which
// decides alike.
func (p *Policy) decide(in *Input) Decision {
	if pl := p.plan(in); pl != nil {
		return p.run(pl, in)
	}
	return p.decideAll(in, true)
}

// decideAll evaluates every rule in order: with native false, by CEL
// alone (the reference FuzzPlan holds plans and native conditions to).
func (p *Policy) decideAll(in *Input, native bool) Decision {
	var act *activation
	for i := range p.rules {
		r := &p.rules[i]
		if !r.matchesTool(in.Tool) {
			continue
		}
		if r.prg != nil {
			var d *Decision
			var matched bool
			if native {
				d, matched = r.evalIn(in, &act)
			} else {
				if act == nil {
					act = in.activation()
				}
				d, matched = r.eval(act)
			}
			if !matched {
				continue
			} else if d != nil {
				return *d
			}
		}
		return Decision{Action: r.action, Rule: r.id}
	}
	return Decision{Action: p.def, Rule: RuleDefault}
}

// matchesTool reports whether r applies to a call of tool.
func (r *rule) matchesTool(tool string) bool {
	if r.tool == "" {
		return true
	}
	if !r.glob {
		return r.tool == tool
	}
	if !strings.HasPrefix(tool, r.prefix) {
		return false
	}
	ok, _ := path.Match(r.tool, tool)
	return ok
}

// eval evaluates r's condition: matched false when it is false; matched
// true with a nil decision when it is true; a deny naming r when it
// cannot be evaluated.
// evalIn evaluates r's condition for in: natively when the native form
// decides it (native.go), else by CEL, with the activation made at most
// once per call (*act).
func (r *rule) evalIn(in *Input, act **activation) (d *Decision, matched bool) {
	if r.native != nil {
		if m, ok := r.native.eval(in); ok {
			return nil, m
		}
	}
	return r.evalCEL(in, act)
}

// evalCEL evaluates r's condition for in by CEL.
func (r *rule) evalCEL(in *Input, act **activation) (d *Decision, matched bool) {
	if *act == nil {
		*act = in.activation()
	}
	return r.eval(*act)
}

func (r *rule) eval(act *activation) (d *Decision, matched bool) {
	out, _, err := r.prg.Eval(act)
	if err == nil {
		if b, ok := out.(types.Bool); ok {
			return nil, bool(b)
		}
		err = fmt.Errorf("the condition gave %s, not a bool", typeName(out))
	}
	return &Decision{Action: Deny, Rule: r.id, Reason: bound("condition failed: " + err.Error())}, true
}

func typeName(v ref.Val) string {
	if v == nil {
		return "nothing"
	}
	return v.Type().TypeName()
}

func bound(s string) string {
	if len(s) <= MaxReasonBytes {
		return s
	}
	s = s[:MaxReasonBytes-3]
	for len(s) > 0 && s[len(s)-1]&0xC0 == 0x80 {
		s = s[:len(s)-1]
	}
	if len(s) > 0 && s[len(s)-1] >= 0xC0 {
		s = s[:len(s)-1]
	}
	return s + "..."
}

// jsonValue converts a strictly parsed JSON value into CEL values, once
// per call (a Go map would be converted again at every reference): objects
// as maps with string keys, arrays as lists, integers within int64 as int
// (other numbers as double), strings, bools and null.
func jsonValue(v canon.Value) ref.Val {
	switch v.Kind() {
	case canon.KindObject:
		return newLazyObject(v)
	case canon.KindArray:
		el := v.Elems()
		out := make([]ref.Val, len(el))
		for i, e := range el {
			out[i] = jsonValue(e)
		}
		return types.NewRefValList(types.DefaultTypeAdapter, out)
	case canon.KindString:
		s, _ := v.Str()
		return types.String(s)
	case canon.KindBool:
		b, _ := v.Bool()
		return types.Bool(b)
	case canon.KindNumber:
		return number(v.Raw())
	}
	return types.NullValue
}

// sharedValue is jsonValue converted whole, for values many calls read
// (a lazyObject caches as it is read, so it is one call's only).
func sharedValue(v canon.Value) ref.Val {
	switch v.Kind() {
	case canon.KindObject:
		m := make(map[ref.Val]ref.Val, v.Len())
		for _, mem := range v.Members() {
			m[types.String(mem.Name)] = sharedValue(mem.Value)
		}
		return types.NewRefValMap(types.DefaultTypeAdapter, m)
	case canon.KindArray:
		el := v.Elems()
		out := make([]ref.Val, len(el))
		for i, e := range el {
			out[i] = sharedValue(e)
		}
		return types.NewRefValList(types.DefaultTypeAdapter, out)
	}
	return jsonValue(v)
}

// emptyMap is what args, server and declaration are when there is none.
var emptyMap = types.NewRefValMap(types.DefaultTypeAdapter, map[ref.Val]ref.Val{})
