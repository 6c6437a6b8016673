package policy

import (
	"strconv"
	"sync/atomic"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/internal/approval"
	"github.com/tracectl/tracectl/snapshot"
)

// Input is what one call's decision reads: the tool and arguments of the
// request as the gate read it, and the snapshot the call bound.
type Input struct {
	Tool     string
	Args     canon.Value // params.arguments; not Valid when absent
	Snapshot *Snapshot   // nil: the call bound none

	d      *decl // Snapshot's entry for Tool, once looked up (declared)
	looked bool
}

// declared returns what the bound snapshot declares of the tool, looked
// up once per call.
func (in *Input) declared() *decl {
	if !in.looked {
		in.d, in.looked = in.Snapshot.decl(in.Tool), true
	}
	return in.d
}

// Snapshot is what decisions read of one declaration snapshot: the server
// as it described itself and each tool's declaration, its digest and the
// digests of its members.
type Snapshot struct {
	Complete bool
	server   ref.Val
	name     *string
	version  *string
	tools    map[string]*decl
}

// decl is what a snapshot says of one tool name: its declarations (more
// than one when the name is repeated) and, once a call has needed it, a
// policy's plan for it (plan.go).
type decl struct {
	ts   []*tool
	plan atomic.Pointer[plan]
}

type tool struct {
	status string // snapshot.DeclOK or DeclUnsupported
	digest string
	// value and fields are nil when the page bytes were unavailable.
	value  ref.Val
	fields map[string]string // member name -> canonical digest ("" when the member cannot be canonicalized)
}

// NewSnapshot reads a snapshot's declarations; load gives the page bytes
// (nil, or a page it cannot give, leaves those tools' values unknown:
// Unavailable then reports it).
func NewSnapshot(m *snapshot.Manifest, load snapshot.LoadFunc) *Snapshot {
	s := &Snapshot{Complete: m.Complete, tools: map[string]*decl{}, name: m.Server.Name, version: m.Server.Version}
	srv := map[ref.Val]ref.Val{}
	if m.Server.Name != nil {
		srv[types.String("name")] = types.String(*m.Server.Name)
	}
	if m.Server.Version != nil {
		srv[types.String("version")] = types.String(*m.Server.Version)
	}
	s.server = types.NewRefValMap(types.DefaultTypeAdapter, srv)
	pages := map[int64][]canon.Value{}
	for _, t := range m.Tools {
		if t.Name == nil {
			continue
		}
		tl := &tool{status: t.Declaration.Status, digest: t.Declaration.Digest}
		d := s.tools[*t.Name]
		if d == nil {
			d = &decl{}
			s.tools[*t.Name] = d
		}
		d.ts = append(d.ts, tl)
		el, ok := pages[t.Page]
		if !ok && load != nil && int(t.Page) < len(m.Pages) {
			el = pageTools(m.Pages[t.Page], load)
			pages[t.Page] = el
		}
		if int(t.Index) >= len(el) || el[t.Index].Kind() != canon.KindObject {
			continue
		}
		v := el[t.Index]
		tl.value = sharedValue(v) // read by every call that binds the snapshot: never lazy
		tl.fields = make(map[string]string, v.Len())
		for _, mem := range v.Members() {
			d, err := mem.Value.Digest(canon.PolicyMCPDecl)
			if err != nil {
				d = ""
			}
			tl.fields[mem.Name] = d
		}
	}
	return s
}

func pageTools(p snapshot.Page, load snapshot.LoadFunc) []canon.Value {
	data, err := load(p.Response.Digest)
	if err != nil || canon.SHA256(data) != p.Response.Digest {
		return nil
	}
	// Read as the collector read it: an ambiguous member is absent.
	doc, err := canon.Parse(data, canon.ParseOptions{AllowDuplicateKeys: true, Limits: canon.Limits{MaxBytes: snapshot.CeilingMaxPageBytes}})
	if err != nil {
		return nil
	}
	res, _ := doc.Root().Get("result")
	tools, _ := res.Get("tools")
	return tools.Elems()
}

// Unavailable reports whether a decision about toolName reads declaration
// bytes this snapshot could not load.
func (s *Snapshot) Unavailable(toolName string) bool {
	if s == nil {
		return false
	}
	for _, t := range s.decl(toolName).list() {
		if t.value == nil && t.status == snapshot.DeclOK {
			return true
		}
	}
	return false
}

// Declaration returns the digest of toolName's declaration in s, or "" when
// s has none (or more than one) for it.
func (s *Snapshot) Declaration(toolName string) string {
	return s.decl(toolName).digest()
}

// decl returns what s declares of a tool name, or nil (s nil included).
func (s *Snapshot) decl(toolName string) *decl {
	if s == nil {
		return nil
	}
	return s.tools[toolName]
}

func (d *decl) list() []*tool {
	if d == nil {
		return nil
	}
	return d.ts
}

// digest is the declaration's digest when the name is declared once.
func (d *decl) digest() string {
	if d == nil || len(d.ts) != 1 {
		return ""
	}
	return d.ts[0].digest
}

// serverValue is server as a condition reads it.
func (in *Input) serverValue() ref.Val {
	if in.Snapshot == nil {
		return emptyMap
	}
	return in.Snapshot.server
}

// declarationValue is declaration as a condition reads it: the tool's
// declaration when the snapshot declares it once, else the empty map.
func (in *Input) declarationValue() ref.Val {
	if ts := in.declared().list(); len(ts) == 1 && ts[0].value != nil {
		return ts[0].value
	}
	return emptyMap
}

func (in *Input) activation() *activation {
	return &activation{tool: types.String(in.Tool), raw: in.Args, server: in.serverValue(), dec: in.declarationValue()}
}

// Engine decides calls under a policy, a lock, or both (the lock first: a
// call it denies is denied whatever the policy says).
type Engine struct {
	policy   *Policy
	lock     *Lock
	approval *approval.Gate // who approves an approve rule's calls (approve.go)
}

// NewEngine returns an engine over p and l (either may be nil; both nil
// allows every call under RuleDefault).
func NewEngine(p *Policy, l *Lock) *Engine { return &Engine{policy: p, lock: l} }

// Decide decides one call. It never fails: what cannot be evaluated denies.
func (e *Engine) Decide(in Input) Decision {
	d, _ := e.DecideDeclared(in)
	return d
}

// DecideDeclared is Decide, and the digest of the tool's declaration in
// the bound snapshot when it declares the name once (else ""), which the
// decision evidence carries: both from one lookup of the tool.
func (e *Engine) DecideDeclared(in Input) (Decision, string) {
	return e.decide(&in), in.declared().digest()
}

func (e *Engine) decide(in *Input) Decision {
	if e.lock != nil {
		if d := e.lock.check(in); d.Action == Deny {
			return d
		}
		if e.policy == nil {
			return Decision{Action: Allow, Rule: RulePin}
		}
	}
	if e.policy == nil {
		return Decision{Action: Allow, Rule: RuleDefault}
	}
	return e.policy.decide(in)
}

// HasRule reports whether id could be the rule of one of e's decisions.
func (e *Engine) HasRule(id string) bool {
	if id == RulePin {
		return e.lock != nil
	}
	if e.policy == nil {
		return id == RuleDefault
	}
	return e.policy.HasRule(id)
}

func number(raw []byte) ref.Val {
	if n, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
		return types.Int(n)
	}
	f, _ := strconv.ParseFloat(string(raw), 64)
	return types.Double(f)
}
