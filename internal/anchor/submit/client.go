// Package submit anchors a bundle's statements in a C2SP tlog-tiles log
// (tracectl log serve): it submits each statement's anchor leaf, builds its
// receipt from the log's tiles with Tessera's client, checks it as a
// verifier will, and writes it to anchors/. verify never imports it.
package submit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/transparency-dev/tessera/client"

	"github.com/tracectl/tracectl/internal/anchor"
)

// maxAddResponse bounds the log's answer to an addition.
const maxAddResponse = 64 << 10

// Client submits statements to one log and builds their receipts.
type Client struct {
	URL  string
	Keys anchor.Keys
	HTTP *http.Client // nil: a client with a 30 s timeout
}

func (c *Client) http() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return &http.Client{Timeout: 30 * time.Second}
}

// add submits the leaf and returns its index (the log answers once the
// entry is sequenced).
func (c *Client) add(ctx context.Context, leaf []byte) (uint64, error) {
	body, err := c.do(ctx, http.MethodPost, "/add", leaf)
	if err != nil {
		return 0, err
	}
	var a struct {
		LeafIndex *uint64 `json:"leaf_index"`
	}
	if err := json.Unmarshal(body, &a); err != nil || a.LeafIndex == nil {
		return 0, fmt.Errorf("log answer %.100q: no leaf_index", body)
	}
	return *a.LeafIndex, nil
}

// await returns a published checkpoint of at least size entries.
func (c *Client) await(ctx context.Context, size uint64) ([]byte, error) {
	return c.do(ctx, http.MethodGet, "/await/"+strconv.FormatUint(size, 10), nil)
}

func (c *Client) do(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.URL, "/")+path, rd)
	if err != nil {
		return nil, err
	}
	res, err := c.http().Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, maxAddResponse+1))
	if err != nil {
		return nil, err
	}
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("log answered %s: %.200s", res.Status, b)
	}
	if len(b) > maxAddResponse {
		return nil, errors.New("log answer too large")
	}
	return b, nil
}

// Anchor submits one statement and returns its receipt, checked (with a
// consistency proof from prev's tree, when given) before it is returned.
// An error before the log answered is retryable; after, the entry is in
// the log and only the proof is retried (the caller retries Prove).
func (c *Client) Anchor(ctx context.Context, path string, statement []byte, prev *anchor.Checked) (*anchor.Receipt, *anchor.Checked, error) {
	leaf, err := anchor.Leaf(statement)
	if err != nil {
		return nil, nil, err
	}
	idx, err := c.add(ctx, leaf)
	if err != nil {
		return nil, nil, fmt.Errorf("submit %s: %w", path, err)
	}
	cp, err := c.await(ctx, idx+1)
	if err != nil {
		return nil, nil, fmt.Errorf("submit %s: %w", path, err)
	}
	return c.Prove(ctx, path, statement, idx, cp, prev)
}

// Prove builds and checks the receipt of a statement at index idx, from
// checkpoint cp (nil: the log's latest) and the log's tiles.
func (c *Client) Prove(ctx context.Context, path string, statement []byte, idx uint64, cp []byte, prev *anchor.Checked) (*anchor.Receipt, *anchor.Checked, error) {
	u, err := url.Parse(strings.TrimRight(c.URL, "/") + "/")
	if err != nil {
		return nil, nil, err
	}
	f, err := client.NewHTTPFetcher(u, c.http())
	if err != nil {
		return nil, nil, err
	}
	if cp == nil {
		if cp, err = f.ReadCheckpoint(ctx); err != nil {
			return nil, nil, err
		}
	}
	r, ck, err := BuildReceipt(ctx, f.ReadTile, c.Keys, c.URL, path, statement, idx, cp, prev)
	if err != nil {
		return nil, nil, fmt.Errorf("prove %s: %w", path, err)
	}
	return r, ck, nil
}

// BuildReceipt makes the receipt of the statement at idx under checkpoint
// cp from the log's tiles, and checks it as a verifier will.
func BuildReceipt(ctx context.Context, tiles client.TileFetcherFunc, k anchor.Keys, logURL, path string, statement []byte, idx uint64, cp []byte, prev *anchor.Checked) (*anchor.Receipt, *anchor.Checked, error) {
	c, _, err := anchor.OpenCheckpoint(cp, k)
	if err != nil {
		return nil, nil, err
	}
	if idx >= c.Size {
		return nil, nil, fmt.Errorf("%w: checkpoint of size %d does not cover index %d", anchor.ErrInvalid, c.Size, idx)
	}
	pb, err := client.NewProofBuilder(ctx, c.Size, tiles)
	if err != nil {
		return nil, nil, err
	}
	path1, err := pb.InclusionProof(ctx, idx)
	if err != nil {
		return nil, nil, err
	}
	r := &anchor.Receipt{
		Format: anchor.ReceiptFormat, Statement: path, Log: logURL,
		LeafIndex: idx, LeafCount: c.Size, AuditPath: anchor.EncodeHashes(path1), MerkleRoot: anchor.EncodeHash(c.Hash),
		Checkpoint: string(cp),
	}
	if prev != nil && prev.Size < c.Size {
		cons, err := pb.ConsistencyProof(ctx, prev.Size, c.Size)
		if err != nil {
			return nil, nil, err
		}
		r.Consistency = &anchor.Consistency{FromSize: prev.Size, Proof: anchor.EncodeHashes(cons)}
	}
	ck, err := r.Check(statement, k)
	if err != nil {
		return nil, nil, err
	}
	if prev != nil {
		if err := anchor.CheckConsistency(prev, ck, r.Consistency); err != nil {
			return nil, nil, err
		}
	}
	return r, ck, nil
}

// Queue anchors a bundle's statements in order, so receipts are numbered
// in log order. Two stages: one goroutine adds each statement to the log
// (answered once sequenced, so indexes follow submission order), another
// waits for a published checkpoint that covers everything added so far
// and builds, checks and writes the receipts in order. Submit never
// blocks: a full queue refuses (and the caller reports it like a failed
// checkpoint).
type Queue struct {
	c      *Client
	bundle string
	report func(path string, r *anchor.Receipt, err error)
	// Retries and Backoff: each addition, wait and proof is tried
	// 1+Retries times; Backoff is the wait before retry n (nil: 100 ms << n
	// on a real timer). An entry is never added twice once the log
	// answered.
	retries int
	backoff func(n int) <-chan time.Time

	jobs  chan job
	added chan *pending
	done  chan struct{}
	once  sync.Once

	seq  int // receipts written (prover only)
	prev *anchor.Checked
}

type job struct {
	path      string
	statement []byte      // nil: read path from the bundle
	indexed   chan result // told the entry's index once it is added
	reply     chan result // told the receipt
}

type result struct {
	r   *anchor.Receipt
	idx uint64
	err error
}

// pending is a statement added (or that failed) on its way to a receipt.
type pending struct {
	j         job
	statement []byte
	idx       uint64
	err       error
}

// MaxPending bounds the statements waiting to be added (and, separately,
// those added and waiting for their receipts).
const MaxPending = 64

// maxBatch bounds the statements one wait for a checkpoint covers.
const maxBatch = 64

// QueueOptions configure NewQueue.
type QueueOptions struct {
	Retries int
	Backoff func(n int) <-chan time.Time
	// Report is called on the queue's goroutine after each statement
	// (a receipt, or the error that left it unanchored).
	Report func(path string, r *anchor.Receipt, err error)
}

// NewQueue starts anchoring the statements of the bundle directory.
func NewQueue(c *Client, bundle string, o QueueOptions) *Queue {
	q := &Queue{c: c, bundle: bundle, report: o.Report, retries: o.Retries, backoff: o.Backoff,
		jobs: make(chan job, MaxPending), added: make(chan *pending, MaxPending), done: make(chan struct{})}
	if q.backoff == nil {
		q.backoff = func(n int) <-chan time.Time { return time.After(100 * time.Millisecond << min(n, 6)) }
	}
	if q.report == nil {
		q.report = func(string, *anchor.Receipt, error) {}
	}
	q.resume()
	go q.adder()
	go q.prover()
	return q
}

// resume picks up the receipts a bundle holds already (its anchoring
// resumed after a crash: seal --anchor): the next receipt is numbered
// after the last, and proves consistency from the last one the log key
// checks, as verify requires of successive receipts.
func (q *Queue) resume() {
	ents, err := os.ReadDir(filepath.Join(q.bundle, anchor.Dir))
	if err != nil {
		return
	}
	best := 0
	for _, e := range ents {
		n, err := strconv.Atoi(strings.TrimSuffix(e.Name(), ".json"))
		if err != nil || n <= 0 || !strings.HasSuffix(e.Name(), ".json") || !e.Type().IsRegular() {
			continue
		}
		q.seq = max(q.seq, n)
		if n < best {
			continue
		}
		b, err := readStatement(filepath.Join(q.bundle, anchor.Dir, e.Name()))
		if err != nil {
			continue
		}
		r, err := anchor.ParseReceipt(b)
		if err != nil {
			continue
		}
		if ck, err := r.CheckLog(q.c.Keys); err == nil {
			best, q.prev = n, ck
		}
	}
}

// ErrQueueFull reports a statement refused because MaxPending wait.
var ErrQueueFull = errors.New("anchor queue full")

// Submit queues the bundle file at path (bundle-relative) for anchoring.
func (q *Queue) Submit(path string) error {
	select {
	case q.jobs <- job{path: path}:
		return nil
	default:
		return fmt.Errorf("%w: %s not anchored", ErrQueueFull, path)
	}
}

// enqueue queues j whenever there is room, even past ctx: the statement is
// anchored (and its receipt kept) after the caller stops waiting.
func (q *Queue) enqueue(ctx context.Context, j job) error {
	select {
	case q.jobs <- j:
		return nil
	default:
	}
	select {
	case q.jobs <- j:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// AnchorNow anchors statement (to be kept at path) after everything queued
// before it, and waits for its receipt until ctx is done.
func (q *Queue) AnchorNow(ctx context.Context, path string, statement []byte) (*anchor.Receipt, error) {
	reply := make(chan result, 1)
	if err := q.enqueue(ctx, job{path: path, statement: statement, reply: reply}); err != nil {
		return nil, err
	}
	select {
	case res := <-reply:
		return res.r, res.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Add adds statement (to be kept at path) to the log after everything
// queued before it and returns its leaf index as soon as the log has
// sequenced it; its receipt follows (Report), before Close returns.
func (q *Queue) Add(ctx context.Context, path string, statement []byte) (uint64, error) {
	indexed := make(chan result, 1)
	if err := q.enqueue(ctx, job{path: path, statement: statement, indexed: indexed}); err != nil {
		return 0, err
	}
	select {
	case res := <-indexed:
		return res.idx, res.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// Close stops taking statements, finishes those queued and returns.
func (q *Queue) Close() {
	q.once.Do(func() { close(q.jobs) })
	<-q.done
}

// adder adds each statement in order.
func (q *Queue) adder() {
	defer close(q.added)
	ctx := context.Background()
	for j := range q.jobs {
		p := &pending{j: j, statement: j.statement}
		if p.statement == nil {
			p.statement, p.err = readStatement(filepath.Join(q.bundle, filepath.FromSlash(j.path)))
		}
		var leaf []byte
		if p.err == nil {
			leaf, p.err = anchor.Leaf(p.statement)
		}
		if p.err == nil {
			if err := q.retry(func() error {
				var err error
				p.idx, err = q.c.add(ctx, leaf)
				return err
			}); err != nil {
				p.err = fmt.Errorf("submit %s: %w", j.path, err)
			}
		}
		if j.indexed != nil {
			j.indexed <- result{idx: p.idx, err: p.err}
		}
		q.added <- p
	}
}

// prover waits for checkpoints and writes receipts, in order.
func (q *Queue) prover() {
	defer close(q.done)
	for p := range q.added {
		batch := []*pending{p}
	drain:
		for len(batch) < maxBatch {
			select {
			case p, ok := <-q.added:
				if !ok {
					break drain
				}
				batch = append(batch, p)
			default:
				break drain
			}
		}
		q.prove(batch)
	}
}

// prove awaits one published checkpoint covering the batch and builds,
// checks and writes its receipts in order.
func (q *Queue) prove(batch []*pending) {
	ctx := context.Background()
	var need uint64
	for _, p := range batch {
		if p.err == nil {
			need = max(need, p.idx+1)
		}
	}
	var cp []byte
	var cpErr error
	if need > 0 {
		cpErr = q.retry(func() error {
			var err error
			cp, err = q.c.await(ctx, need)
			return err
		})
	}
	for _, p := range batch {
		if p.err == nil && cpErr != nil {
			p.err = fmt.Errorf("%s: no checkpoint covers log entry %d: %w", p.j.path, p.idx, cpErr)
		}
		var r *anchor.Receipt
		if p.err == nil {
			var ck *anchor.Checked
			use := cp
			p.err = q.retry(func() error {
				var err error
				if r, ck, err = q.c.Prove(ctx, p.j.path, p.statement, p.idx, use, q.prev); err != nil {
					use = nil // a tile gone meanwhile: the next try reads the latest checkpoint
				}
				return err
			})
			if p.err == nil {
				if p.err = q.write(r); p.err == nil {
					q.prev = ck
				}
			}
		}
		if p.err != nil {
			r = nil
		}
		q.report(p.j.path, r, p.err)
		if p.j.reply != nil {
			p.j.reply <- result{r: r, idx: p.idx, err: p.err}
		}
	}
}

// retry runs f up to 1+retries times, waiting Backoff between tries.
func (q *Queue) retry(f func() error) error {
	for n := 0; ; n++ {
		err := f()
		if err == nil || n >= q.retries {
			return err
		}
		<-q.backoff(n)
	}
}

// write stores the receipt as anchors/<seq>.json, exclusively, 0600. A
// queue that resumes a bundle's anchoring (seal --anchor after a crash)
// numbers on after the receipts already there.
func (q *Queue) write(r *anchor.Receipt) error {
	b, err := r.Marshal()
	if err != nil {
		return err
	}
	dir := filepath.Join(q.bundle, anchor.Dir)
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	for {
		q.seq++
		err := WriteFile(filepath.Join(dir, strconv.Itoa(q.seq)+".json"), b)
		if !errors.Is(err, fs.ErrExist) {
			return err
		}
	}
}

// WriteFile creates p exclusively (0600), writes b and fsyncs it.
func WriteFile(p string, b []byte) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func readStatement(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, anchor.MaxStatementBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > anchor.MaxStatementBytes {
		return nil, fmt.Errorf("%s: more than %d bytes", p, anchor.MaxStatementBytes)
	}
	return b, nil
}
