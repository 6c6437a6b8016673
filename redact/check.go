package redact

import (
	"slices"
	"strconv"
	"strings"

	"github.com/tracectl/tracectl/canon"
)

// CodeBadRedaction is a redaction list that does not describe the bytes it
// comes with (Check, apply).
const CodeBadRedaction Code = "redact_bad_redaction"

// Check verifies a redaction list against the redacted bytes it was
// retained with, as a verifier does (DESIGN.md, step 2): the list is
// strictly sorted by pointer, and each pointer (from the message root)
// resolves, through no repeated member name, to exactly the marker of its
// class, a class classes lists. It needs no detectors and no rules.
func Check(redacted []byte, reds []Redaction, lim canon.Limits) error {
	doc, err := canon.Parse(redacted, canon.ParseOptions{Limits: lim, AllowDuplicateKeys: true})
	if err != nil {
		return &Error{Code: CodeInvalidMessage, Rule: -1, Err: err}
	}
	for i, r := range reds {
		if i > 0 && strings.Compare(reds[i-1].Pointer, r.Pointer) >= 0 {
			return badRedaction(r.Pointer, "the list is not strictly sorted by pointer")
		}
		if !slices.Contains(classes(), r.Class) {
			return badRedaction(r.Pointer, "unknown class "+quoteBounded(string(r.Class)))
		}
		v, err := resolve(doc, r.Pointer)
		if err != nil {
			return err
		}
		if string(v.Raw()) != string(marker(r.Class)) {
			return badRedaction(r.Pointer, "the value there is not the marker of class "+string(r.Class))
		}
	}
	return nil
}

// apply replaces the value at each pointer of reds in original by its
// class's marker, splicing exactly as Message does. apply(O, L) equal to R
// shows that R is O with exactly the values L names hidden, whatever found
// them (DESIGN.md, step 5). Pointers must resolve, through no repeated
// member name, to values that do not nest.
func apply(original []byte, reds []Redaction, lim canon.Limits) ([]byte, error) {
	doc, err := canon.Parse(original, canon.ParseOptions{Limits: lim, AllowDuplicateKeys: true})
	if err != nil {
		return nil, &Error{Code: CodeInvalidMessage, Rule: -1, Err: err}
	}
	spans := make([]span, 0, len(reds))
	for _, r := range reds {
		v, err := resolve(doc, r.Pointer)
		if err != nil {
			return nil, err
		}
		spans = append(spans, span{start: v.Offset(), end: v.Offset() + int64(len(v.Raw())), class: r.Class, pointer: r.Pointer})
	}
	slices.SortFunc(spans, func(a, b span) int { return int(a.start - b.start) })
	out := make([]byte, 0, len(original))
	at := int64(0)
	for _, s := range spans {
		if s.start < at {
			return nil, badRedaction(s.pointer, "the value there overlaps another redaction")
		}
		out = append(append(out, original[at:s.start]...), marker(s.class)...)
		at = s.end
	}
	return append(out, original[at:]...), nil
}

// resolve finds the value at an RFC 6901 pointer from the root of doc.
func resolve(doc *canon.Doc, ptr string) (canon.Value, error) {
	if ptr == "" {
		return doc.Root(), nil
	}
	toks, err := splitPointer(ptr)
	if err != nil {
		return canon.Value{}, badRedaction(ptr, err.Error())
	}
	v := doc.Root()
	for _, t := range toks {
		switch v.Kind() {
		case canon.KindObject:
			next, ok := v.Get(t)
			if !ok {
				return canon.Value{}, badRedaction(ptr, "no member "+quoteBounded(t)+", or a repeated one")
			}
			v = next
		case canon.KindArray:
			i, err := strconv.Atoi(t)
			elems := v.Elems()
			if err != nil || i < 0 || i >= len(elems) || t != strconv.Itoa(i) {
				return canon.Value{}, badRedaction(ptr, "no element "+quoteBounded(t))
			}
			v = elems[i]
		default:
			return canon.Value{}, badRedaction(ptr, "the pointer goes below a "+v.Kind().String())
		}
	}
	return v, nil
}

func badRedaction(ptr, detail string) *Error {
	return &Error{Code: CodeBadRedaction, Rule: -1, Pointer: ptr, Detail: detail}
}
