//go:build !windows

package tlog

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/transparency-dev/tessera"
	"github.com/transparency-dev/tessera/api/layout"
	"github.com/transparency-dev/tessera/client"
	"github.com/transparency-dev/tessera/storage/posix"
	"golang.org/x/mod/sumdb/note"
)

const maxKeyFile = 4 << 10

// MaxEntryBytes is the largest entry accepted: Tessera's default entry
// limit (a C2SP tlog-tiles entry is at most 64 KiB - 1).
const MaxEntryBytes = tessera.DefaultEntrySizeLimit

// Config configures a log.
type Config struct {
	Dir    string // holds the key and the static tree
	Origin string // the checkpoint origin for a new log (ignored once the key exists)
	// CheckpointInterval: how often Tessera may publish a checkpoint
	// (0: 100 ms, the POSIX driver's minimum). An addition is answered
	// once a published checkpoint covers it.
	CheckpointInterval time.Duration
	// BatchMaxAge: how long an addition waits for others to share its
	// integration (0: 10 ms).
	BatchMaxAge time.Duration
	// Witnesses, when set, must cosign a checkpoint before it is
	// published (C2SP tlog-witness).
	Witnesses *tessera.WitnessGroup
}

// Log is a running log.
type Log struct {
	Origin   string
	Verifier string // the verifier key text (log.pub)
	static   string
	appender *tessera.Appender
	reader   tessera.LogReader
	awaiter  *tessera.PublicationAwaiter
	shutdown func(context.Context) error
	cancel   context.CancelFunc
}

// LoadOrCreateKey reads the log's signer key from dir, or creates it
// (private key 0600, created exclusively; log.pub next to it).
func LoadOrCreateKey(dir, origin string) (note.Signer, string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, "", err
	}
	kp, pp := filepath.Join(dir, KeyFile), filepath.Join(dir, PubFile)
	skey, err := readBounded(kp)
	if errors.Is(err, fs.ErrNotExist) {
		if origin == "" {
			return nil, "", errors.New("a new log needs an origin")
		}
		s, v, gerr := note.GenerateKey(rand.Reader, origin)
		if gerr != nil {
			return nil, "", fmt.Errorf("generate log key: %w", gerr)
		}
		if err := writeExclusive(kp, []byte(s+"\n")); err != nil {
			return nil, "", err
		}
		if err := writeExclusive(pp, []byte(v+"\n")); err != nil {
			return nil, "", err
		}
		skey = []byte(s)
	} else if err != nil {
		return nil, "", err
	}
	signer, err := note.NewSigner(strings.TrimSpace(string(skey)))
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", kp, err)
	}
	pub, err := readBounded(pp)
	if err != nil {
		return nil, "", err
	}
	if _, err := note.NewVerifier(strings.TrimSpace(string(pub))); err != nil {
		return nil, "", fmt.Errorf("%s: %w", pp, err)
	}
	return signer, strings.TrimSpace(string(pub)), nil
}

func readBounded(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxKeyFile {
		return nil, fmt.Errorf("%s: more than %d bytes", p, maxKeyFile)
	}
	return b, nil
}

func writeExclusive(p string, b []byte) error {
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

// Open starts the log in c.Dir (creating its key on first start).
func Open(ctx context.Context, c Config) (*Log, error) {
	signer, pub, err := LoadOrCreateKey(c.Dir, c.Origin)
	if err != nil {
		return nil, err
	}
	static := filepath.Join(c.Dir, StaticDir)
	if err := os.MkdirAll(static, 0o700); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	drv, err := posix.New(ctx, posix.Config{Path: static})
	if err != nil {
		cancel()
		return nil, err
	}
	ci, age := c.CheckpointInterval, c.BatchMaxAge
	if ci == 0 {
		ci = 100 * time.Millisecond
	}
	if age == 0 {
		age = 10 * time.Millisecond
	}
	opts := tessera.NewAppendOptions().
		WithCheckpointSigner(signer).
		WithBatching(256, age).
		WithCheckpointInterval(ci).
		WithCheckpointRepublishInterval(time.Minute).
		// What was added was answered only once published: a shutdown
		// waits briefly, not Tessera's default minute, for the rest.
		WithShutdownTimeout(5 * time.Second)
	if c.Witnesses != nil {
		opts = opts.WithWitnesses(*c.Witnesses, nil)
	}
	app, shutdown, reader, err := tessera.NewAppender(ctx, drv, opts)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("start tessera: %w", err)
	}
	return &Log{
		Origin: signer.Name(), Verifier: pub, static: static,
		appender: app, reader: reader, shutdown: shutdown, cancel: cancel,
		awaiter: tessera.NewPublicationAwaiter(ctx, reader.ReadCheckpoint, 10*time.Millisecond),
	}, nil
}

// Close shuts Tessera down (integrating what was added) and stops it.
func (l *Log) Close(ctx context.Context) error {
	err := l.shutdown(ctx)
	l.cancel()
	return err
}

// AddResponse answers POST /add.
type AddResponse struct {
	LeafIndex  uint64 `json:"leaf_index"`
	Checkpoint string `json:"checkpoint,omitempty"` // Add: a published checkpoint that covers the entry
}

// Add appends an entry and waits until a published checkpoint covers it.
func (l *Log) Add(ctx context.Context, entry []byte) (*AddResponse, error) {
	idx, cp, err := l.awaiter.Await(ctx, l.appender.Add(ctx, tessera.NewEntry(entry)))
	if err != nil {
		return nil, err
	}
	return &AddResponse{LeafIndex: idx.Index, Checkpoint: string(cp)}, nil
}

// Sequence appends an entry and returns its index once Tessera has
// sequenced it (a batch later, not a publication later): a client adds
// several entries in order, then waits once (Await) for a checkpoint that
// covers them all.
func (l *Log) Sequence(ctx context.Context, entry []byte) (uint64, error) {
	idx, err := l.appender.Add(ctx, tessera.NewEntry(entry))()
	if err != nil {
		return 0, err
	}
	return idx.Index, nil
}

// Await returns a published checkpoint of at least size entries, waiting
// for one.
func (l *Log) Await(ctx context.Context, size uint64) ([]byte, error) {
	if size == 0 {
		return l.reader.ReadCheckpoint(ctx)
	}
	_, cp, err := l.awaiter.Await(ctx, func() (tessera.Index, error) { return tessera.Index{Index: size - 1}, nil })
	return cp, err
}

// maxAwait bounds how long GET /await/<size> holds a request.
const maxAwait = 30 * time.Second

// Handler serves POST /add (answered once the entry is sequenced: its
// index), GET /await/<size> (a published checkpoint of at least size
// entries, once there is one), GET /entries/<index> (one entry's bytes, so
// a record's transparency URI resolves) and the tlog-tiles static files.
func (l *Log) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /add", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxEntryBytes))
		if err != nil {
			http.Error(w, "entry too large or unreadable", http.StatusRequestEntityTooLarge)
			return
		}
		if len(body) == 0 {
			http.Error(w, "empty entry", http.StatusBadRequest)
			return
		}
		idx, err := l.Sequence(r.Context(), body)
		if err != nil {
			http.Error(w, "add: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(AddResponse{LeafIndex: idx})
	})
	mux.HandleFunc("GET /await/{size}", func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.ParseUint(r.PathValue("size"), 10, 64)
		if err != nil {
			http.Error(w, "bad size", http.StatusBadRequest)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), maxAwait)
		defer cancel()
		cp, err := l.Await(ctx, n)
		if err != nil {
			http.Error(w, "await: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write(cp)
	})
	mux.HandleFunc("GET /entries/{index}", func(w http.ResponseWriter, r *http.Request) {
		i, err := strconv.ParseUint(r.PathValue("index"), 10, 64)
		if err != nil {
			http.Error(w, "bad index", http.StatusBadRequest)
			return
		}
		e, err := ReadEntry(r.Context(), client.FileFetcher{Root: l.static}, i)
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(e)
	})
	files := http.FileServer(http.Dir(l.static))
	mux.HandleFunc("GET /", func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if p != "/"+layout.CheckpointPath && !strings.HasPrefix(p, "/tile/") {
			http.NotFound(w, r) // never .state or anything else in the directory
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
	return mux
}

// Fetcher reads a log's tlog-tiles resources.
type Fetcher interface {
	ReadCheckpoint(ctx context.Context) ([]byte, error)
	ReadTile(ctx context.Context, l, i uint64, p uint8) ([]byte, error)
	ReadEntryBundle(ctx context.Context, i uint64, p uint8) ([]byte, error)
}

// ReadEntry returns entry i of a log whose checkpoint covers it.
func ReadEntry(ctx context.Context, f Fetcher, i uint64) ([]byte, error) {
	raw, err := f.ReadCheckpoint(ctx)
	if err != nil {
		return nil, err
	}
	size, err := checkpointSize(raw)
	if err != nil {
		return nil, err
	}
	if i >= size {
		return nil, fmt.Errorf("entry %d: the log has %d", i, size)
	}
	b, err := client.GetEntryBundle(ctx, f.ReadEntryBundle, i/layout.EntryBundleWidth, size)
	if err != nil {
		return nil, err
	}
	j := i % layout.EntryBundleWidth
	if j >= uint64(len(b.Entries)) {
		return nil, fmt.Errorf("entry %d: bundle too short", i)
	}
	return b.Entries[j], nil
}

// checkpointSize reads the size line of an unverified checkpoint (the
// entry is only served, never trusted, here).
func checkpointSize(raw []byte) (uint64, error) {
	lines := strings.SplitN(string(raw), "\n", 3)
	if len(lines) < 3 {
		return 0, errors.New("malformed checkpoint")
	}
	return strconv.ParseUint(lines[1], 10, 64)
}
