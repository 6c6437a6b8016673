// Package independent_test checks the committed vectors with a second,
// minimal verifier that imports none of tracectl's packages: only the
// standard library and golang.org/x/mod/sumdb/tlog, with its own tiny
// RFC 8785 encoder for the record. It recomputes the core commitments from
// spec/ alone, so the vectors do not merely agree with the code that made
// them:
//
//   - the record's Ed25519 signature over the JCS bytes of the record without
//     its signature member, under the trusted key, which is cnf.jwk;
//   - the RFC 6962 root of the transcript lines equals tool_transcript.hash,
//     and call_count equals the attempt lines; for a disclosed bundle
//     (disclosure.proof, no transcript), each disclosed line's audit path
//     leads to that root;
//   - every attempt's snapshot manifest digest is recorded by an earlier
//     snapshot line and is the SHA-256 of retained bytes; every retained
//     payload and page is the SHA-256 of its bytes, read from the payload
//     pack (or, for v1 bundles, blobs/sha256/<hex>);
//   - for row 6, missing bytes and changed bytes are really what the vector
//     says they are, and a claim that contradicts intact bytes (tool,
//     arguments digest, JSON-RPC id, isError) really does;
//   - a response's bytes answer the id of its attempt's request bytes, and
//     an attempt's tool is declared by the complete snapshot it binds,
//     exactly when the vector says so (response_id_mismatch,
//     tool_not_declared).
package independent_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"

	"golang.org/x/mod/sumdb/tlog"
)

// dirs: the current vectors and the frozen v1-format ones.
var dirs = []string{"../testdata/v4", "../testdata/v3", "../testdata/v2", "../testdata/v1"}

type manifest struct {
	ID       string `json:"id"`
	Kind     string `json:"kind"`
	Row      int    `json:"row"`
	Verifier struct {
		TrustedKey     string `json:"trusted_key"`
		AcceptWithheld bool   `json:"accept_withheld"`
	} `json:"verifier"`
	Expect struct {
		Verdict   string   `json:"verdict"`
		Required  []string `json:"required_codes"`
		Forbidden []string `json:"forbidden_codes"`
	} `json:"expect"`
}

func (m *manifest) requires(c string) bool { return slices.Contains(m.Expect.Required, c) }
func (m *manifest) forbids(c string) bool  { return slices.Contains(m.Expect.Forbidden, c) }

func TestIndependent(t *testing.T) {
	checked := map[string]int{}
	for _, dir := range dirs {
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		independentDir(t, dir, ents, checked)
	}
	for _, k := range []string{"signature", "root", "root differs", "commitments", "unavailable", "mismatch", "claim contradicted", "frames", "frame gap", "settlement", "response ids", "declared tools"} {
		if checked[k] == 0 {
			t.Errorf("no vector had its %s checked", k)
		}
	}
	t.Logf("checked: %v", checked)
}

func independentDir(t *testing.T, dir string, ents []os.DirEntry, checked map[string]int) {
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		vdir := filepath.Join(dir, e.Name())
		var m manifest
		if err := readJSON(filepath.Join(vdir, "vector.json"), &m); err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		if m.Kind != "bundle" {
			continue
		}
		t.Run(filepath.Base(dir)+"/"+m.ID, func(t *testing.T) {
			b, err := load(vdir, m.Verifier.TrustedKey)
			if err != nil {
				t.Fatal(err)
			}
			verified := m.Expect.Verdict == "verified"
			if verified || m.forbids("signature_invalid") {
				checked["signature"]++
				if err := b.checkSignature(); err != nil {
					t.Errorf("signature: %v", err)
				}
			}
			if verified || m.forbids("binding_failure") {
				checked["root"]++
				if err := b.checkRoot(); err != nil {
					t.Errorf("root: %v", err)
				}
			}
			if m.requires("checkpoint_bound") || m.requires("checkpoint_invalid") {
				// The last checkpoint's root over the prefix its name
				// claims: equal iff the vector says it binds.
				checked["checkpoint"]++
				if err := b.checkRoot(); (err == nil) != m.requires("checkpoint_bound") {
					t.Errorf("checkpoint root over %d lines: %v; the vector requires checkpoint_bound: %v", b.prefix, err, m.requires("checkpoint_bound"))
				}
			}
			if m.requires("binding_failure") && m.requires("signature_valid") {
				// Signed, but the transcript is not what was signed.
				checked["root differs"]++
				if err := b.checkSignature(); err != nil {
					t.Errorf("signature: %v", err)
				}
				if err := b.checkRoot(); err == nil {
					t.Error("the root matches, but the vector names a binding failure")
				}
			}
			c := b.commitments()
			if verified {
				checked["commitments"]++
				if err := b.checkCallCount(); err != nil {
					t.Error(err)
				}
				if err := b.checkSnapshotBindings(); err != nil {
					t.Error(err)
				}
				// A verifier told to accept withheld payloads verifies their
				// digests only: none may be missing or changed, and some
				// must really be withheld.
				switch {
				case m.Verifier.AcceptWithheld && (c.missing+c.mismatched > 0 || c.ok == 0 || c.notRetained == 0):
					t.Errorf("commitments: %+v, want every retained one present and matching, and some withheld", c)
				case !m.Verifier.AcceptWithheld && (c.missing+c.mismatched+c.notRetained > 0 || c.ok == 0):
					t.Errorf("commitments: %+v, want all present and matching", c)
				}
				if d := b.claimsDiffer(); d != 0 {
					t.Errorf("%d lines whose claims contradict their retained bytes", d)
				}
			}
			if verified || m.requires("response_id_mismatch") {
				checked["response ids"]++
				if d := b.responseIDsDiffer(); (d > 0) != m.requires("response_id_mismatch") {
					t.Errorf("%d responses answer another request's id; the vector requires response_id_mismatch: %v", d, m.requires("response_id_mismatch"))
				}
			}
			if verified || m.requires("tool_not_declared") {
				checked["declared tools"]++
				if d := b.undeclaredCalls(); (d > 0) != m.requires("tool_not_declared") {
					t.Errorf("%d calls to tools their complete snapshot does not declare; the vector requires tool_not_declared: %v", d, m.requires("tool_not_declared"))
				}
			}
			if m.requires("evidence_unavailable") && m.forbids("evidence_mismatch") {
				checked["unavailable"]++
				if c.missing+c.notRetained == 0 || c.mismatched != 0 {
					t.Errorf("commitments: %+v, want bytes missing and none changed", c)
				}
			}
			if m.requires("evidence_mismatch") && m.forbids("evidence_unavailable") {
				checked["mismatch"]++
				switch d := b.claimsDiffer(); {
				case c.missing+c.notRetained != 0:
					t.Errorf("commitments: %+v, want none missing", c)
				case c.mismatched == 0 && d == 0:
					t.Errorf("commitments: %+v and no claim contradicts its bytes, want bytes changed or a claim contradicted", c)
				case c.mismatched == 0:
					checked["claim contradicted"]++
				}
			}
			if gap, framed := b.frameGap(); framed {
				switch {
				case m.requires("frame_sequence"):
					checked["frame gap"]++
					if gap == "" {
						t.Error("the vector names a frame_sequence finding, and every direction's frames run 0, 1, 2, ...")
					}
				case verified:
					checked["frames"]++
					if gap != "" {
						t.Errorf("frames: %s", gap)
					}
				}
				// Settlement is final: a delivered server response that a
				// client matches to a call already answered (spec/transcript.md,
				// "Server to client") exactly when the vector says so.
				if second := b.secondAnswer(); m.requires("response_after_settlement") {
					checked["settlement"]++
					if second == "" {
						t.Error("the vector names response_after_settlement, and no delivered response answers an answered call again")
					}
				} else if verified || m.forbids("response_after_settlement") {
					checked["settlement"]++
					if second != "" {
						t.Errorf("settlement: %s", second)
					}
				}
			}
		})
	}
}

// frameGap follows the frame indexes of a transcript whose header says
// frames_committed (spec/transcript.md, "Frames"): per direction, the
// "frame" member of attempts, response observations and notifications and
// the "index" of frame lines must run 0, 1, 2, ... in line order. It
// returns the first departure ("" when none) and whether the transcript
// commits to frames at all.
func (b *bundle) frameGap() (gap string, framed bool) {
	if len(b.events) == 0 || b.events[0]["frames_committed"] != true {
		return "", false
	}
	next := map[string]int64{}
	for i, e := range b.events {
		var dir string
		var idx any
		switch e["type"] {
		case "attempt":
			dir, idx = "client_to_server", e["frame"]
		case "observation":
			if e["kind"] != "response" && e["kind"] != "late_response" {
				continue
			}
			dir, idx = "server_to_client", e["frame"]
		case "notification":
			dir, idx = e["direction"].(string), e["frame"]
		case "frame":
			dir, idx = e["direction"].(string), e["index"]
		default:
			continue
		}
		n, ok := idx.(json.Number)
		if !ok {
			return fmt.Sprintf("line %d commits to a %s frame without its index", i, dir), true
		}
		v, err := n.Int64()
		if err != nil || v != next[dir] {
			return fmt.Sprintf("line %d: %s frame %s where %d comes next", i, dir, n, next[dir]), true
		}
		next[dir]++
	}
	return "", true
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(v)
}

type bundle struct {
	dir    string
	key    ed25519.PublicKey
	record []byte
	lines  [][]byte
	events []map[string]any
	// disclosure: a disclosed bundle (disclosure.proof beside the record,
	// no transcript): lines are the disclosed ones, each with its
	// RFC 6962 inclusion path.
	disclosure *disclosureProof
	// prefix: a bundle whose producer died signed only checkpoints
	// (checkpoints/<lines>.json, no record.json): the record is the last
	// checkpoint, over the first prefix lines.
	prefix int
}

type disclosureProof struct {
	TreeSize int64 `json:"tree_size"`
	Entries  []struct {
		Index int64    `json:"index"`
		Line  string   `json:"line"`
		Path  []string `json:"path"`
	} `json:"entries"`
}

func load(vdir, keyFile string) (*bundle, error) {
	b := &bundle{dir: vdir}
	keyPEM, err := os.ReadFile(filepath.Join(vdir, keyFile))
	if err != nil {
		return nil, err
	}
	blk, _ := pem.Decode(keyPEM)
	if blk == nil || blk.Type != "PUBLIC KEY" {
		return nil, errors.New("trusted key: not a PUBLIC KEY PEM block")
	}
	pub, err := x509.ParsePKIXPublicKey(blk.Bytes)
	if err != nil {
		return nil, err
	}
	var ok bool
	if b.key, ok = pub.(ed25519.PublicKey); !ok {
		return nil, fmt.Errorf("trusted key: %T, want Ed25519", pub)
	}
	if b.record, err = os.ReadFile(filepath.Join(vdir, "record.json")); errors.Is(err, os.ErrNotExist) {
		// The last checkpoint stands for the record; its name says how many
		// lines it covers (spec/checkpoints.md).
		ents, _ := os.ReadDir(filepath.Join(vdir, "checkpoints"))
		for _, e := range ents {
			if n, cerr := strconv.Atoi(strings.TrimSuffix(e.Name(), ".json")); cerr == nil && strings.HasSuffix(e.Name(), ".json") && n > b.prefix {
				b.prefix = n
			}
		}
		if b.prefix == 0 {
			return nil, err
		}
		if b.record, err = os.ReadFile(filepath.Join(vdir, "checkpoints", strconv.Itoa(b.prefix)+".json")); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	}
	tr, err := os.ReadFile(filepath.Join(vdir, "transcript.jsonl"))
	if errors.Is(err, os.ErrNotExist) {
		if proof, perr := os.ReadFile(filepath.Join(vdir, "disclosure.proof")); perr == nil {
			b.disclosure = &disclosureProof{}
			if err := json.Unmarshal(proof, b.disclosure); err != nil {
				return nil, fmt.Errorf("disclosure.proof: %w", err)
			}
			var lines []byte
			for _, e := range b.disclosure.Entries {
				lines = append(append(lines, e.Line...), '\n')
			}
			tr, err = lines, nil
		}
	}
	if err != nil {
		return nil, err
	}
	if len(tr) == 0 || tr[len(tr)-1] != '\n' {
		return nil, errors.New("transcript: empty or not LF-terminated")
	}
	b.lines = bytes.Split(tr[:len(tr)-1], []byte("\n"))
	for _, l := range b.lines {
		var ev map[string]any
		dec := json.NewDecoder(bytes.NewReader(l))
		dec.UseNumber()
		if err := dec.Decode(&ev); err != nil {
			ev = nil // a vector may commit to a line that is not valid; it is still a leaf
		}
		b.events = append(b.events, ev)
	}
	return b, nil
}

func (b *bundle) recordObject() (map[string]any, error) {
	var rec map[string]any
	dec := json.NewDecoder(bytes.NewReader(b.record))
	dec.UseNumber()
	if err := dec.Decode(&rec); err != nil {
		return nil, err
	}
	return rec, nil
}

// checkSignature: Ed25519 over JCS(record without signature), under the
// trusted key, which must be cnf.jwk; and record.json is its own JCS form.
func (b *bundle) checkSignature() error {
	rec, err := b.recordObject()
	if err != nil {
		return err
	}
	whole, err := jcs(rec)
	if err != nil {
		return err
	}
	if !bytes.Equal(whole, b.record) {
		return errors.New("record.json is not its own RFC 8785 form")
	}
	jwk, _ := rec["cnf"].(map[string]any)["jwk"].(map[string]any)
	if jwk["kty"] != "OKP" || jwk["crv"] != "Ed25519" || jwk["x"] != base64.RawURLEncoding.EncodeToString(b.key) {
		return fmt.Errorf("cnf.jwk %v is not the trusted key", jwk)
	}
	sig, err := base64.RawURLEncoding.Strict().DecodeString(rec["signature"].(string))
	if err != nil {
		return err
	}
	delete(rec, "signature")
	pre, err := jcs(rec)
	if err != nil {
		return err
	}
	if !ed25519.Verify(b.key, pre, sig) {
		return errors.New("the signature does not verify")
	}
	return nil
}

// checkRoot: the RFC 6962 tree hash of the lines (tlog's own algorithm,
// with stored hashes) equals tool_transcript.hash.
func (b *bundle) checkRoot() error {
	rec, err := b.recordObject()
	if err != nil {
		return err
	}
	tt, ok := rec["tool_transcript"].(map[string]any)
	if !ok {
		return errors.New("the record has no tool_transcript")
	}
	if d := b.disclosure; d != nil {
		// Each disclosed line is a leaf of the signed tree: its audit path
		// leads to the signed root (tlog.CheckRecord).
		raw, err := hex.DecodeString(strings.TrimPrefix(fmt.Sprint(tt["hash"]), "sha256:"))
		if err != nil || len(raw) != 32 {
			return fmt.Errorf("the record's tool_transcript.hash %v", tt["hash"])
		}
		var root tlog.Hash
		copy(root[:], raw)
		for _, e := range d.Entries {
			var path tlog.RecordProof
			for _, h := range e.Path {
				hb, err := hex.DecodeString(h)
				if err != nil || len(hb) != 32 {
					return fmt.Errorf("line %d: a malformed path hash", e.Index)
				}
				var x tlog.Hash
				copy(x[:], hb)
				path = append(path, x)
			}
			if err := tlog.CheckRecord(path, d.TreeSize, root, e.Index, tlog.RecordHash([]byte(e.Line))); err != nil {
				return fmt.Errorf("line %d is not in the signed transcript: %w", e.Index, err)
			}
		}
		return nil
	}
	var stored []tlog.Hash
	hr := tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			out[i] = stored[x]
		}
		return out, nil
	})
	lines := b.lines
	if b.prefix > 0 {
		if b.prefix > len(lines) {
			return fmt.Errorf("the checkpoint names %d lines, the transcript has %d", b.prefix, len(lines))
		}
		lines = lines[:b.prefix]
	}
	for i, l := range lines {
		hs, err := tlog.StoredHashes(int64(i), l, hr)
		if err != nil {
			return err
		}
		stored = append(stored, hs...)
	}
	root, err := tlog.TreeHash(int64(len(lines)), hr)
	if err != nil {
		return err
	}
	if got := "sha256:" + hex.EncodeToString(root[:]); got != tt["hash"] {
		return fmt.Errorf("the lines hash to %s, the record signs %v", got, tt["hash"])
	}
	return nil
}

func (b *bundle) checkCallCount() error {
	if b.disclosure != nil {
		return nil // a disclosure shows some attempts only: nothing to count
	}
	rec, err := b.recordObject()
	if err != nil {
		return err
	}
	n := 0
	for _, e := range b.events {
		if e["type"] == "attempt" {
			n++
		}
	}
	cc := rec["tool_transcript"].(map[string]any)["call_count"].(json.Number).String()
	if cc != strconv.Itoa(n) {
		return fmt.Errorf("call_count %s, %d attempt lines", cc, n)
	}
	return nil
}

// checkSnapshotBindings: each attempt binds a snapshot line recorded
// before it, with the same manifest digest, whose blob hashes to it.
func (b *bundle) checkSnapshotBindings() error {
	snaps := map[string]string{}
	for _, e := range b.events {
		switch e["type"] {
		case "snapshot":
			snaps[e["snapshot_id"].(string)] = e["manifest_digest"].(string)
		case "attempt":
			ref := e["snapshot"].(map[string]any)
			d, _ := ref["manifest_digest"].(string)
			if d == "" || snaps[ref["snapshot_id"].(string)] != d {
				return fmt.Errorf("attempt %v binds %v, not an earlier snapshot line", e["attempt_id"], ref)
			}
			if st := b.blobState(d, -1); st != "ok" {
				return fmt.Errorf("attempt %v: manifest %s is %s", e["attempt_id"], d, st)
			}
		}
	}
	return nil
}

// frameRuleDiffers reports a frame line whose gate rule its retained bytes
// certainly contradict, judged without tracectl's gate: a valid JSON array
// is a batch, and bytes encoding/json cannot read at all (with no BOM or CR
// to blame) are invalid JSON.
func frameRuleDiffers(b *bundle, e map[string]any) bool {
	p, _ := e["payload"].(map[string]any)
	d, _ := p["digest"].(string)
	data, err := b.payload((d))
	if err != nil || bytes.HasPrefix(data, []byte("\xEF\xBB\xBF")) || bytes.ContainsRune(data, '\r') {
		return false
	}
	rule, _ := e["rule"].(string)
	trimmed := bytes.TrimLeft(data, " \t")
	switch {
	case len(trimmed) > 0 && trimmed[0] == '[' && json.Valid(data):
		return rule != "batch"
	case !json.Valid(data):
		return rule != "invalid_json" && rule != "frame_too_large" && rule != "too_deep"
	}
	return false
}

// claimsDiffer counts the attempt and response observation lines whose
// tool, arguments_digest (SHA-256 of the RFC 8785 arguments),
// jsonrpc_id.text or is_error differ from their retained bytes, and the
// frame lines whose rule does (spec/transcript.md, "attempt",
// "observation", "frame").
func (b *bundle) claimsDiffer() int {
	n := 0
	for _, e := range b.events {
		var p map[string]any
		var ok bool
		if e["type"] == "frame" && frameRuleDiffers(b, e) {
			n++
			continue
		}
		switch e["type"] {
		case "attempt":
			p, ok = e["request"].(map[string]any)
		case "observation":
			p, ok = e["response"].(map[string]any)
		}
		if !ok {
			continue
		}
		data, salt, err := b.saltedPayload(p["digest"].(string))
		if err != nil {
			continue
		}
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Params struct {
				Name      string         `json:"name"`
				Arguments map[string]any `json:"arguments"`
			} `json:"params"`
			Result struct {
				IsError bool `json:"isError"`
			} `json:"result"`
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if dec.Decode(&msg) != nil {
			n++
			continue
		}
		// A redacted copy (v3): each listed pointer must hold the marker
		// "[REDACTED:<class>]", and the arguments digest is over the exact
		// arguments, which the bundle does not hold.
		reds, _ := p["redactions"].([]any)
		if len(reds) > 0 {
			if !redactionsHold(data, reds) {
				n++
			}
			if e["type"] == "attempt" {
				continue
			}
		}
		if e["type"] == "observation" {
			if claimed, _ := e["is_error"].(bool); claimed != msg.Result.IsError {
				n++
			}
			continue
		}
		var digest any // absent without arguments
		if msg.Params.Arguments != nil {
			args, err := jcs(msg.Params.Arguments)
			if err != nil {
				n++
				continue
			}
			sum := sha256.Sum256(args)
			digest = "sha256:" + hex.EncodeToString(sum[:])
			if salt != nil {
				// v3: SHA-256("tracectl salted arguments v1" 0x00 || the
				// request's salt || the 32 bytes of the plain digest).
				h := sha256.New()
				h.Write([]byte("tracectl salted arguments v1\x00"))
				h.Write(salt)
				h.Write(sum[:])
				digest = "sha256:" + hex.EncodeToString(h.Sum(nil))
			}
		}
		id, _ := e["jsonrpc_id"].(map[string]any)
		if e["tool"] != msg.Params.Name || e["arguments_digest"] != digest || id["text"] != string(msg.ID) {
			n++
		}
	}
	return n
}

// messageID returns the exact JSON text of a retained message's id, or ""
// when the bytes are missing or not a JSON object.
func (b *bundle) messageID(p map[string]any) (string, bool) {
	data, err := b.payload(p["digest"].(string))
	if err != nil {
		return "", false
	}
	var msg struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(data, &msg) != nil {
		return "", false
	}
	return string(msg.ID), true
}

// responseIDsDiffer counts response and late_response observations whose
// retained bytes answer an id other than their attempt's request bytes'
// (spec/verification.md, "Responses answer their own request").
func (b *bundle) responseIDsDiffer() int {
	reqID := map[string]string{}
	n := 0
	for _, e := range b.events {
		switch e["type"] {
		case "attempt":
			if p, ok := e["request"].(map[string]any); ok {
				if id, ok := b.messageID(p); ok {
					reqID[e["attempt_id"].(string)] = id
				}
			}
		case "observation":
			p, ok := e["response"].(map[string]any)
			aid, _ := e["attempt_id"].(string)
			want, known := reqID[aid]
			if !ok || !known {
				continue
			}
			if got, ok := b.messageID(p); ok && got != want {
				n++
			}
		}
	}
	return n
}

// undeclaredCalls counts attempts bound to a complete snapshot, with no
// list_changed since, whose tool the snapshot's manifest does not list.
func (b *bundle) undeclaredCalls() int {
	n := 0
	for _, e := range b.events {
		if e["type"] != "attempt" {
			continue
		}
		ref, _ := e["snapshot"].(map[string]any)
		if complete, _ := ref["complete"].(bool); !complete {
			continue
		}
		if changed, _ := ref["list_changed_since"].(bool); changed {
			continue
		}
		d, _ := ref["manifest_digest"].(string)
		var m struct {
			Tools []struct {
				Name *string `json:"name"`
			} `json:"tools"`
		}
		if b.payloadJSON(d, &m) != nil {
			continue
		}
		declared := false
		for _, t := range m.Tools {
			if tool, _ := e["tool"].(string); t.Name != nil && *t.Name == tool {
				declared = true
			}
		}
		if !declared {
			n++
		}
	}
	return n
}

type counts struct{ ok, missing, mismatched, notRetained int }

// commitments classifies every commitment of the bundle: payloads of the
// transcript lines, snapshot manifests, and the pages each manifest lists.
func (b *bundle) commitments() counts {
	var c counts
	add := func(st string) {
		switch st {
		case "ok":
			c.ok++
		case "missing":
			c.missing++
		default:
			c.mismatched++
		}
	}
	for _, e := range b.events {
		for _, k := range []string{"payload", "request", "response"} {
			p, ok := e[k].(map[string]any)
			if !ok {
				continue
			}
			if p["retained"] != true {
				c.notRetained++
				continue
			}
			n, _ := strconv.Atoi(p["length"].(json.Number).String())
			add(b.blobState(p["digest"].(string), n))
		}
		if e["type"] != "snapshot" {
			continue
		}
		d := e["manifest_digest"].(string)
		st := b.blobState(d, -1)
		add(st)
		if st != "ok" {
			continue
		}
		var m struct {
			Pages []struct {
				Request, Response struct {
					Digest string `json:"digest"`
					Length int    `json:"length"`
				}
			} `json:"pages"`
		}
		if b.payloadJSON(d, &m) != nil {
			c.mismatched++
			continue
		}
		for _, p := range m.Pages {
			add(b.blobState(p.Request.Digest, p.Request.Length))
			add(b.blobState(p.Response.Digest, p.Response.Length))
		}
	}
	return c
}

// payload returns the retained bytes a digest names, as spec/transcript.md
// ("Payloads") lays them out: the first entry of payloads.pack
// ("<hex> <length>[ <salt hex>]LF<bytes>LF") whose header names the digest,
// else (a bundle written before the pack) blobs/sha256/<hex>.
// os.ErrNotExist when neither holds it. The bytes are not checked here
// (blobState does).
func (b *bundle) payload(digest string) ([]byte, error) {
	data, _, err := b.saltedPayload(digest)
	return data, err
}

// saltedPayload is payload with the entry's salt (nil for a plain entry or
// a blob file).
func (b *bundle) saltedPayload(digest string) ([]byte, []byte, error) {
	pack, err := os.ReadFile(filepath.Join(b.dir, "payloads.pack"))
	if err == nil {
		want := strings.TrimPrefix(digest, "sha256:")
		for len(pack) > 0 {
			nl := bytes.IndexByte(pack, '\n')
			if nl < 0 {
				break
			}
			fields := strings.Split(string(pack[:nl]), " ")
			if len(fields) < 2 || len(fields) > 3 {
				break
			}
			var salt []byte
			if len(fields) == 3 {
				var serr error
				if salt, serr = hex.DecodeString(fields[2]); serr != nil || len(salt) != 16 {
					break
				}
			}
			hexd := fields[0]
			n, perr := strconv.Atoi(fields[1])
			if perr != nil || n < 0 || nl+1+n+1 > len(pack) || pack[nl+1+n] != '\n' {
				break // the rest is not entries: nothing after it is read
			}
			if hexd == want {
				return pack[nl+1 : nl+1+n], salt, nil
			}
			pack = pack[nl+1+n+1:]
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, nil, err
	}
	data, err := os.ReadFile(filepath.Join(b.dir, "blobs", "sha256", strings.TrimPrefix(digest, "sha256:")))
	return data, nil, err
}

// commit is the commitment to data: SHA-256 of the bytes, or with a salt
// (transcript v3) SHA-256("tracectl salted payload v1" 0x00 || salt ||
// bytes).
func commit(salt, data []byte) string {
	h := sha256.New()
	if salt != nil {
		h.Write([]byte("tracectl salted payload v1\x00"))
		h.Write(salt)
	}
	h.Write(data)
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

func (b *bundle) payloadJSON(digest string, v any) error {
	data, err := b.payload(digest)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return dec.Decode(v)
}

// blobState is "ok", "missing" or "mismatched" (length -1: not checked).
func (b *bundle) blobState(digest string, length int) string {
	data, salt, err := b.saltedPayload(digest)
	if errors.Is(err, os.ErrNotExist) {
		return "missing"
	}
	if err != nil || commit(salt, data) != digest || length >= 0 && len(data) != length {
		return "mismatched"
	}
	return "ok"
}

// jcs is a minimal RFC 8785 encoder for what a Trust Record holds:
// objects, arrays, strings, booleans, null and integers within 2^53-1.
func jcs(v any) ([]byte, error) {
	var buf bytes.Buffer
	err := jcsTo(&buf, v)
	return buf.Bytes(), err
}

func jcsTo(w *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case nil:
		w.WriteString("null")
	case bool:
		w.WriteString(strconv.FormatBool(x))
	case string:
		jcsString(w, x)
	case json.Number:
		n, err := strconv.ParseInt(x.String(), 10, 64)
		if err != nil || n > 1<<53-1 || n < -(1<<53-1) {
			return fmt.Errorf("number %s outside the integer boundary", x)
		}
		w.WriteString(strconv.FormatInt(n, 10))
	case []any:
		w.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				w.WriteByte(',')
			}
			if err := jcsTo(w, e); err != nil {
				return err
			}
		}
		w.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		// RFC 8785 3.2.3: order by UTF-16 code units.
		slices.SortFunc(keys, func(a, b string) int { return slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b))) })
		w.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				w.WriteByte(',')
			}
			jcsString(w, k)
			w.WriteByte(':')
			if err := jcsTo(w, x[k]); err != nil {
				return err
			}
		}
		w.WriteByte('}')
	default:
		return fmt.Errorf("unexpected %T", v)
	}
	return nil
}

// jcsString writes s with RFC 8785's minimal escapes.
func jcsString(w *bytes.Buffer, s string) {
	w.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			w.WriteByte('\\')
			w.WriteRune(r)
		case r == '\b':
			w.WriteString(`\b`)
		case r == '\t':
			w.WriteString(`\t`)
		case r == '\n':
			w.WriteString(`\n`)
		case r == '\f':
			w.WriteString(`\f`)
		case r == '\r':
			w.WriteString(`\r`)
		case r < 0x20:
			fmt.Fprintf(w, `\u%04x`, r)
		default:
			w.WriteRune(r)
		}
	}
	w.WriteByte('"')
}

// redactionsHold says whether every listed RFC 6901 pointer resolves, in
// the redacted copy, to the string "[REDACTED:<class>]" of its class.
func redactionsHold(data []byte, reds []any) bool {
	var doc any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if dec.Decode(&doc) != nil {
		return false
	}
	for _, r := range reds {
		m, _ := r.(map[string]any)
		ptr, _ := m["pointer"].(string)
		class, _ := m["class"].(string)
		v := doc
		if ptr != "" {
			for _, tok := range strings.Split(ptr[1:], "/") {
				tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
				switch c := v.(type) {
				case map[string]any:
					v = c[tok]
				case []any:
					i, err := strconv.Atoi(tok)
					if err != nil || i < 0 || i >= len(c) {
						return false
					}
					v = c[i]
				default:
					return false
				}
			}
		}
		if v != "[REDACTED:"+class+"]" {
			return false
		}
	}
	return true
}

// secondAnswer finds a server response committed as delivered (a frame line
// marked forwarded) whose id a client matches to a call that already had its
// response: by value, as the TypeScript SDK's Number(id) does ("3" and 3.0
// are 3). It returns where, or "".
func (b *bundle) secondAnswer() string {
	answered := map[string]string{} // match key -> attempt id
	callID := map[string]string{}   // attempt id -> its id's match key
	for i, e := range b.events {
		switch e["type"] {
		case "attempt":
			if id, ok := e["jsonrpc_id"].(map[string]any); ok && id["present"] == true {
				k := jsMatch(id["text"].(string))
				callID[e["attempt_id"].(string)] = k
				delete(answered, k)
			}
		case "observation":
			if e["kind"] == "response" || e["kind"] == "late_response" || e["kind"] == "transport_failure" {
				a, _ := e["attempt_id"].(string)
				if k, ok := callID[a]; ok {
					answered[k] = a
				}
			}
		case "frame":
			if e["direction"] != "server_to_client" || e["kind"] != "response" || e["disposition"] != "forwarded" {
				continue
			}
			id, ok := e["jsonrpc_id"].(map[string]any)
			if !ok {
				continue
			}
			if a, ok := answered[jsMatch(id["text"].(string))]; ok {
				return fmt.Sprintf("line %d delivers a response under id %s after attempt %s had its answer", i, id["text"], a)
			}
		}
	}
	return ""
}

// jsMatch is the key a client matches a JSON id by: a number's value, or a
// string's value as JavaScript's Number reads it (decimal forms only here:
// enough for the vectors), else the string itself.
func jsMatch(text string) string {
	var v any
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return "?" + text
	}
	s := ""
	switch v := v.(type) {
	case json.Number:
		s = string(v)
	case string:
		s = strings.TrimSpace(v)
		if s == "" {
			s = "0"
		}
	case nil:
		s = "0"
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return "n:" + strconv.FormatFloat(f, 'g', -1, 64)
	}
	return "s:" + s
}
