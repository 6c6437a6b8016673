package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/snapshot"
)

// LockFormat names the lockfile format (spec/policy.md, "Lockfile").
const LockFormat = "tracectl.lock/v1"

// MaxLockBytes bounds a lockfile: some 100,000 pinned tools.
const MaxLockBytes = 64 << 20

// ErrLock is wrapped by every error ParseLock and NewLock return.
var ErrLock = errors.New("invalid lockfile")

// Lock pins tool declarations: the server's identity as it described itself
// and, per tool, the digest of its whole declaration under the declaration
// canonicalization and of each of its members (so a drift names them).
type Lock struct {
	Format            string              `json:"format"`
	DeclarationPolicy string              `json:"declaration_policy"`
	Server            LockServer          `json:"server"`
	Tools             map[string]LockTool `json:"tools"`
}

// LockServer is the server a lock was made from, as it described itself.
type LockServer struct {
	Name    *string `json:"name,omitempty"`
	Version *string `json:"version,omitempty"`
}

// LockTool is one pinned declaration.
type LockTool struct {
	Digest string            `json:"digest"`
	Fields map[string]string `json:"fields"`
}

// ParseLock reads a lockfile strictly: strict JSON (no repeated member at
// any depth), no unknown member, this format.
func ParseLock(data []byte) (*Lock, error) {
	if len(data) > MaxLockBytes {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrLock, len(data), MaxLockBytes)
	}
	if _, err := canon.Parse(data, canon.ParseOptions{Limits: canon.Limits{MaxBytes: MaxLockBytes}}); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrLock, err)
	}
	var l Lock
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrLock, err)
	}
	switch {
	case l.Format != LockFormat:
		return nil, fmt.Errorf("%w: format %q, want %q", ErrLock, l.Format, LockFormat)
	case l.DeclarationPolicy != canon.PolicyMCPDeclID:
		return nil, fmt.Errorf("%w: declaration_policy %q, want %q", ErrLock, l.DeclarationPolicy, canon.PolicyMCPDeclID)
	case l.Tools == nil:
		return nil, fmt.Errorf("%w: tools is missing", ErrLock)
	}
	for name, t := range l.Tools {
		if _, err := canon.ParseDigest(t.Digest); err != nil {
			return nil, fmt.Errorf("%w: tool %q: digest: %w", ErrLock, name, err)
		}
	}
	return &l, nil
}

// NewLock pins every tool of a complete snapshot. A tool whose declaration
// cannot be canonicalized, or whose name repeats, cannot be pinned: an
// error names it.
func NewLock(m *snapshot.Manifest, load snapshot.LoadFunc) (*Lock, error) {
	if !m.Complete {
		return nil, fmt.Errorf("%w: the snapshot is incomplete (%s): a lock made from it could miss tools", ErrLock, strings.Join(m.IncompleteReasons, ", "))
	}
	s := NewSnapshot(m, load)
	l := &Lock{Format: LockFormat, DeclarationPolicy: canon.PolicyMCPDeclID, Server: LockServer{Name: s.name, Version: s.version}, Tools: map[string]LockTool{}}
	for name, d := range s.tools {
		ts := d.ts
		switch {
		case len(ts) > 1:
			return nil, fmt.Errorf("%w: tool %q is declared %d times", ErrLock, name, len(ts))
		case ts[0].status != snapshot.DeclOK:
			return nil, fmt.Errorf("%w: tool %q: its declaration cannot be canonicalized", ErrLock, name)
		case ts[0].fields == nil:
			return nil, fmt.Errorf("%w: tool %q: its page bytes are unavailable", ErrLock, name)
		}
		l.Tools[name] = LockTool{Digest: ts[0].digest, Fields: ts[0].fields}
	}
	return l, nil
}

// Encode returns the lock's canonical bytes and a final LF.
func (l *Lock) Encode() ([]byte, error) {
	b, err := canon.Marshal(l)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// check denies a call the lock does not allow (RulePin); an allow means the
// lock has nothing against it.
func (l *Lock) check(in *Input) Decision {
	deny := func(format string, a ...any) Decision {
		return Decision{Action: Deny, Rule: RulePin, Reason: bound(fmt.Sprintf(format, a...))}
	}
	s := in.Snapshot
	if s == nil {
		return deny("the call bound no snapshot: its declaration cannot be checked against the lock")
	}
	if l.Server.Name != nil && (s.name == nil || *s.name != *l.Server.Name) {
		got := "none"
		if s.name != nil {
			got = fmt.Sprintf("%q", *s.name)
		}
		return deny("server name %s, pinned %q", got, *l.Server.Name)
	}
	pin, pinned := l.Tools[in.Tool]
	ts := in.declared().list()
	switch {
	case !pinned:
		return deny("tool %q is not pinned", in.Tool)
	case len(ts) == 0:
		return deny("tool %q is not in the bound snapshot", in.Tool)
	case len(ts) > 1:
		return deny("tool %q is declared %d times in the bound snapshot", in.Tool, len(ts))
	case ts[0].status != snapshot.DeclOK:
		return deny("tool %q: its declaration cannot be canonicalized", in.Tool)
	case ts[0].digest == pin.Digest:
		return Decision{Action: Allow, Rule: RulePin}
	case ts[0].fields == nil:
		return deny("tool %q: declaration drifted (fields unknown: page bytes unavailable)", in.Tool)
	}
	return deny("tool %q: declaration drifted: %s", in.Tool, strings.Join(driftedFields(pin.Fields, ts[0].fields), ", "))
}

// driftedFields names the members whose digests differ, or that one side
// lacks, sorted.
func driftedFields(pinned, now map[string]string) []string {
	var out []string
	for k, v := range pinned {
		if w, ok := now[k]; !ok || w != v || v == "" {
			out = append(out, k)
		}
	}
	for k := range now {
		if _, ok := pinned[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// Drift lists the tools whose pins differ between two locks (added,
// removed, or changed with the members), for tracectl pin --update.
func Drift(old, new *Lock) []string {
	var out []string
	for name, o := range old.Tools {
		n, ok := new.Tools[name]
		switch {
		case !ok:
			out = append(out, name+": removed")
		case n.Digest != o.Digest:
			out = append(out, name+": changed: "+strings.Join(driftedFields(o.Fields, n.Fields), ", "))
		}
	}
	for name := range new.Tools {
		if _, ok := old.Tools[name]; !ok {
			out = append(out, name+": added")
		}
	}
	slices.Sort(out)
	return out
}
