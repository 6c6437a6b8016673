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

// add submits the leaf and returns its index and a checkpoint covering it.
func (c *Client) add(ctx context.Context, leaf []byte) (uint64, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(c.URL, "/")+"/add", bytes.NewReader(leaf))
	if err != nil {
		return 0, nil, err
	}
	res, err := c.http().Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, maxAddResponse+1))
	if err != nil {
		return 0, nil, err
	}
	if res.StatusCode != http.StatusOK {
		return 0, nil, fmt.Errorf("log answered %s: %.200s", res.Status, body)
	}
	if len(body) > maxAddResponse {
		return 0, nil, errors.New("log answer too large")
	}
	var a struct {
		LeafIndex  uint64 `json:"leaf_index"`
		Checkpoint string `json:"checkpoint"`
	}
	if err := json.Unmarshal(body, &a); err != nil {
		return 0, nil, fmt.Errorf("log answer: %w", err)
	}
	return a.LeafIndex, []byte(a.Checkpoint), nil
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
	idx, cp, err := c.add(ctx, leaf)
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

// Queue anchors a bundle's statements in order, on one goroutine, so
// receipts are numbered in log order. Submit never blocks: a full queue
// refuses (and the caller reports it like a failed checkpoint).
type Queue struct {
	c      *Client
	bundle string
	report func(path string, r *anchor.Receipt, err error)
	// Retries and Backoff: each statement is tried 1+Retries times; Backoff
	// is the wait before retry n (nil: 100 ms << n on a real timer).
	retries int
	backoff func(n int) <-chan time.Time

	jobs chan job
	done chan struct{}
	once sync.Once

	seq  int
	prev *anchor.Checked
}

type job struct {
	path      string
	statement []byte // nil: read path from the bundle
	reply     chan result
}

type result struct {
	r   *anchor.Receipt
	err error
}

// MaxPending bounds the statements waiting to be anchored.
const MaxPending = 64

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
		jobs: make(chan job, MaxPending), done: make(chan struct{})}
	if q.backoff == nil {
		q.backoff = func(n int) <-chan time.Time { return time.After(100 * time.Millisecond << min(n, 6)) }
	}
	if q.report == nil {
		q.report = func(string, *anchor.Receipt, error) {}
	}
	go q.run()
	return q
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

// AnchorNow anchors statement (to be kept at path) after everything queued
// before it, and waits for its receipt until ctx is done.
func (q *Queue) AnchorNow(ctx context.Context, path string, statement []byte) (*anchor.Receipt, error) {
	reply := make(chan result, 1)
	j := job{path: path, statement: statement, reply: reply}
	// Queued whenever there is room, even past ctx: the statement is
	// anchored (and its receipt kept) after the caller stops waiting.
	select {
	case q.jobs <- j:
	default:
		select {
		case q.jobs <- j:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	select {
	case res := <-reply:
		return res.r, res.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Close stops taking statements, finishes those queued and returns.
func (q *Queue) Close() {
	q.once.Do(func() { close(q.jobs) })
	<-q.done
}

func (q *Queue) run() {
	defer close(q.done)
	for j := range q.jobs {
		r, err := q.one(j)
		q.report(j.path, r, err)
		if j.reply != nil {
			j.reply <- result{r, err}
		}
	}
}

func (q *Queue) one(j job) (*anchor.Receipt, error) {
	ctx := context.Background()
	st := j.statement
	if st == nil {
		var err error
		if st, err = readStatement(filepath.Join(q.bundle, filepath.FromSlash(j.path))); err != nil {
			return nil, err
		}
	}
	leaf, err := anchor.Leaf(st)
	if err != nil {
		return nil, err
	}
	var idx uint64
	var cp []byte
	for n := 0; ; n++ {
		if idx, cp, err = q.c.add(ctx, leaf); err == nil {
			break
		}
		if n >= q.retries {
			return nil, fmt.Errorf("submit %s: %w", j.path, err)
		}
		<-q.backoff(n)
	}
	var r *anchor.Receipt
	var ck *anchor.Checked
	for n := 0; ; n++ {
		if r, ck, err = q.c.Prove(ctx, j.path, st, idx, cp, q.prev); err == nil {
			break
		}
		if n >= q.retries || errors.Is(err, anchor.ErrFork) {
			return nil, err
		}
		cp = nil // the next try reads the log's latest checkpoint
		<-q.backoff(n)
	}
	if err := q.write(r); err != nil {
		return nil, err
	}
	q.prev = ck
	return r, nil
}

// write stores the receipt as anchors/<seq>.json, exclusively, 0600.
func (q *Queue) write(r *anchor.Receipt) error {
	b, err := r.Marshal()
	if err != nil {
		return err
	}
	dir := filepath.Join(q.bundle, anchor.Dir)
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	q.seq++
	return WriteFile(filepath.Join(dir, strconv.Itoa(q.seq)+".json"), b)
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
