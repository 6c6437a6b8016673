package policy

import (
	"sync"

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
// Plans are cached in the snapshot, for tools it declares only (a client
// choosing tool names cannot grow the cache), and for one policy at a
// time.

// plan is a policy's rules reduced for one tool of one snapshot.
type plan struct {
	steps []step
	// final is what decides when no step does: a rule that matches
	// whatever the arguments, or the policy's default.
	final Decision
}

// step is a rule whose condition reads the arguments.
type step struct{ r *rule }

// planCache is a snapshot's plans, per tool, for one policy.
type planCache struct {
	mu     sync.Mutex
	policy *Policy
	plans  map[string]*plan
}

// plan returns p's plan for tool in s, built on first use, or nil where
// there is none to keep (no snapshot, or a tool it does not declare).
func (s *Snapshot) plan(p *Policy, tool string) *plan {
	if s == nil || len(s.tools[tool]) == 0 {
		return nil
	}
	c := &s.plans
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.policy != p {
		c.policy, c.plans = p, map[string]*plan{}
	}
	if pl, ok := c.plans[tool]; ok {
		return pl
	}
	pl := p.newPlan(&Input{Tool: tool, Snapshot: s})
	c.plans[tool] = pl
	return pl
}

// newPlan reduces p's rules for in's tool and snapshot (in.Args unused).
func (p *Policy) newPlan(in *Input) *plan {
	pl := &plan{final: Decision{Action: p.def, Rule: RuleDefault}}
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
		pl.steps = append(pl.steps, step{r: r})
	}
	return pl
}

// run decides in under pl.
func (p *Policy) run(pl *plan, in *Input) Decision {
	if len(pl.steps) == 0 {
		return pl.final
	}
	act := in.activation()
	for _, st := range pl.steps {
		d, matched := st.r.eval(act)
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
