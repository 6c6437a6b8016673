// Package witness is a minimal C2SP tlog-witness: it cosigns a log's
// checkpoints (C2SP tlog-cosignature, cosignature/v1) only when each is
// signed by the log's key and is consistent with the last checkpoint it
// cosigned for that log, so a log that shows two histories under one key
// cannot get both cosigned. tracectl log serve --witness collects its
// cosignatures before publishing a checkpoint; verify --witness-key checks
// them. It keeps its state in memory: it is the witness tracectl's tests
// run, and a reference for the protocol, not a deployment.
package witness

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"

	f_log "github.com/transparency-dev/formats/log"
	fnote "github.com/transparency-dev/formats/note"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"
)

// maxBody bounds a request: a checkpoint with a few signatures and a
// consistency proof of at most 2*64 hashes.
const maxBody = 64 << 10

// Witness cosigns checkpoints of the logs it knows.
type Witness struct {
	signer *fnote.Signer
	logs   map[string]note.Verifier // by origin
	// Refused, if set, is called with each checkpoint refused and why
	// (tests wait on it).
	Refused func(origin string, err error)

	mu   sync.Mutex
	last map[string]state
}

type state struct {
	size uint64
	root []byte
}

// New returns a witness signing with skey (a note signer key) for the
// logs whose verifier keys are given.
func New(skey string, logKeys ...string) (*Witness, error) {
	s, err := fnote.NewSignerForCosignatureV1(skey)
	if err != nil {
		return nil, err
	}
	w := &Witness{signer: s, logs: map[string]note.Verifier{}, last: map[string]state{}}
	for _, k := range logKeys {
		v, err := note.NewVerifier(strings.TrimSpace(k))
		if err != nil {
			return nil, err
		}
		w.logs[v.Name()] = v
	}
	return w, nil
}

// errConflict is a request whose old size is not the last one cosigned.
type errConflict struct{ size uint64 }

func (e errConflict) Error() string { return fmt.Sprintf("old size is not %d", e.size) }

// refusal is a refused checkpoint with the status C2SP tlog-witness names.
type refusal struct {
	status int
	msg    string
}

func (e refusal) Error() string { return e.msg }

func refuse(status int, format string, a ...any) error {
	return refusal{status, fmt.Sprintf(format, a...)}
}

// ServeHTTP serves POST /add-checkpoint (C2SP tlog-witness).
func (w *Witness) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/add-checkpoint" {
		http.NotFound(rw, r)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(rw, r.Body, maxBody))
	if err != nil {
		http.Error(rw, "body too large", http.StatusRequestEntityTooLarge)
		return
	}
	sig, origin, err := w.add(body)
	var c errConflict
	switch {
	case errors.As(err, &c):
		rw.Header().Set("Content-Type", "text/x.tlog.size")
		rw.WriteHeader(http.StatusConflict)
		fmt.Fprintf(rw, "%d\n", c.size)
	case err != nil:
		if w.Refused != nil {
			w.Refused(origin, err)
		}
		status := http.StatusBadRequest
		var rf refusal
		if errors.As(err, &rf) {
			status = rf.status
		}
		http.Error(rw, err.Error(), status)
	default:
		_, _ = rw.Write(sig)
	}
}

// add checks a request and returns the cosignature line.
func (w *Witness) add(body []byte) ([]byte, string, error) {
	br := bufio.NewReader(bytes.NewReader(body))
	line, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "old ") {
		return nil, "", errors.New("malformed request: no old size")
	}
	old, err := strconv.ParseUint(strings.TrimSuffix(line[4:], "\n"), 10, 64)
	if err != nil {
		return nil, "", errors.New("malformed old size")
	}
	var p [][]byte
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return nil, "", errors.New("malformed request: no checkpoint")
		}
		if line == "\n" {
			break
		}
		if len(p) == 128 {
			return nil, "", errors.New("consistency proof too long")
		}
		h, err := base64.StdEncoding.DecodeString(strings.TrimSuffix(line, "\n"))
		if err != nil || len(h) != 32 {
			return nil, "", errors.New("malformed proof line")
		}
		p = append(p, h)
	}
	cpRaw, _ := io.ReadAll(br)
	origin, _, _ := strings.Cut(string(cpRaw), "\n")
	v, ok := w.logs[origin]
	if !ok {
		return nil, origin, refuse(http.StatusNotFound, "unknown log %.100q", origin)
	}
	cp, _, n, err := f_log.ParseCheckpoint(cpRaw, origin, v)
	if err != nil {
		return nil, origin, refuse(http.StatusForbidden, "%v", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	last := w.last[origin]
	switch {
	case old != last.size:
		return nil, origin, errConflict{last.size}
	case cp.Size < old:
		return nil, origin, refuse(http.StatusBadRequest, "checkpoint of size %d older than the %d cosigned", cp.Size, last.size)
	case last.size == 0:
		// Nothing cosigned yet: any tree is consistent with it.
	case cp.Size == last.size:
		if !bytes.Equal(cp.Hash, last.root) {
			return nil, origin, refuse(http.StatusConflict, "two roots for size %d: the log forked", cp.Size)
		}
	default:
		if err := proof.VerifyConsistency(rfc6962.DefaultHasher, last.size, cp.Size, p, last.root, cp.Hash); err != nil {
			return nil, origin, refuse(http.StatusUnprocessableEntity, "not consistent with the %d entries cosigned: the log forked: %v", last.size, err)
		}
	}
	signed, err := note.Sign(&note.Note{Text: n.Text}, w.signer)
	if err != nil {
		return nil, origin, err
	}
	w.last[origin] = state{size: cp.Size, root: cp.Hash}
	// The signature block is what follows the note's text and blank line.
	return signed[len(n.Text)+1:], origin, nil
}
