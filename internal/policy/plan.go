package policy

import (
	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
)

// Plans. Everything a condition reads but the arguments (the tool, the
// server, the declaration) is fixed by the call's tool and the snapshot
// it binds. So, once per tool declared in a snapshot, a policy's rules
// are reduced to a plan: the rules whose tool matches, in order, and for
// each condition that CEL's partial evaluation, with the arguments
// unknown, already decides (has(server.name) && server.name == "evil", or
// tool == "shell" && size(args) > 0 for another tool), that value: a rule
// whose condition is false is left out, and the plan ends at the first
// rule that matches whatever the arguments. A call then evaluates only
// the conditions that read the arguments.
//
// A plan decides every call as decideAll does: partial evaluation gives a
// value only where every value of the unknowns gives the same (CEL's
// logical operators absorb an unknown or an error the way they absorb any
// other value), and only a bool is folded: a condition whose partial
// result is an error, or not a bool, or unknown, is evaluated per call,
// with the same program and so the same reason. FuzzPlan holds it to that.
//
// Plans are kept in the snapshot, one per tool it declares (a client
// choosing tool names cannot grow them), for one policy at a time.

// plan is a policy's rules reduced for one tool of one snapshot.
type plan struct {
	policy *Policy // whose plan
	steps  []step
	// prog holds the native programs of the steps, side by side (a
	// decision runs cold: one array to read, not one per rule).
	prog native
	// final is what decides when no step does: a rule that matches
	// whatever the arguments, or the policy's default.
	final Decision
}

// step is a rule whose condition reads the arguments; its native program,
// when it has one, is prog.code[from:to].
type step struct {
	r        *rule
	from, to int32
}

// plan returns p's plan for the call's tool in its snapshot, built on
// first use, or nil where there is none to keep (no snapshot, or a tool it
// does not declare). Built twice at worst, by calls racing: alike.
func (p *Policy) plan(in *Input) *plan {
	d := in.declared()
	if d == nil {
		return nil
	}
	if pl := d.plan.Load(); pl != nil && pl.policy == p {
		return pl
	}
	pl := p.newPlan(&Input{Tool: in.Tool, Snapshot: in.Snapshot})
	d.plan.Store(pl)
	return pl
}

func (p *Policy) newPlan(in *Input) *plan {
	pl := &plan{policy: p, final: Decision{Action: p.def, Rule: RuleDefault}}
	act := in.activation()
	var partial cel.PartialActivation
	for i := range p.rules {
		r := &p.rules[i]
		if !r.matchesTool(in.Tool) {
			continue
		}
		if r.prg == nil {
			pl.final = Decision{Action: r.action, Rule: r.id}
			return pl
		}
		if r.partial != nil {
			if partial == nil {
				var err error
				if partial, err = cel.PartialVars(act, cel.AttributePattern("args")); err != nil {
					partial = nil
				}
			}
			if partial != nil {
				if out, _, err := r.partial.Eval(partial); err == nil {
					if b, ok := out.(types.Bool); ok {
						if !b {
							continue // false whatever the arguments
						}
						pl.final = Decision{Action: r.action, Rule: r.id}
						return pl
					}
				}
			}
		}
		st := step{r: r}
		if r.native != nil {
			st.from, st.to = pl.prog.link(r.native)
		}
		pl.steps = append(pl.steps, st)
	}
	return pl
}

// run decides in under pl.
func (p *Policy) run(pl *plan, in *Input) Decision {
	if len(pl.steps) == 0 {
		return pl.final
	}
	var act *activation
	for _, st := range pl.steps {
		var d *Decision
		var matched, ok bool
		if st.r.native != nil {
			matched, ok = pl.prog.run(in, st.from, st.to)
		}
		if !ok {
			d, matched = st.r.evalCEL(in, &act)
		}
		if !matched {
			continue
		}
		if d != nil {
			return *d
		}
		return Decision{Action: st.r.action, Rule: st.r.id}
	}
	return pl.final
}
