package producer

import (
	"sync"
	"sync/atomic"
)

// writebackEvery is how many bytes the recorder appends (journal and pack
// together) between two writeback starts.
const writebackEvery = 4 << 20

// writeback starts the kernel writing back what the recorder has appended,
// in the durability modes that do not fsync each call (none, batch), on a
// goroutine of its own: never on the recording path, never waited for.
// Seal must make the whole bundle durable; with writeback under way as the
// bundle grows, it finds little left to flush. It promises nothing: a line
// is durable only once an fsync covered it. Where the platform has no way
// to start writeback without waiting for it (startWriteback), or a File is
// not an OS file (a test's fault injector), it does nothing.
type writeback struct {
	files   []File
	pending atomic.Int64  // bytes appended since the last start
	kick    chan struct{} // never closed: note may run after stop (Seal's last lines)
	quit    chan struct{}
	done    chan struct{}
	once    sync.Once
	starts  atomic.Int64 // writeback starts, for tests
}

func newWriteback(files ...File) *writeback {
	w := &writeback{files: files, kick: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			select {
			case <-w.quit:
				// A start asked for before stop still runs.
				select {
				case <-w.kick:
					w.start()
				default:
				}
				return
			case <-w.kick:
				w.start()
			}
		}
	}()
	return w
}

func (w *writeback) start() {
	for _, f := range w.files {
		startWriteback(f)
	}
	w.starts.Add(1)
}

// note counts n appended bytes, and wakes the goroutine (without waiting)
// every writebackEvery bytes. Safe on a nil writeback.
func (w *writeback) note(n int) {
	if w == nil {
		return
	}
	if w.pending.Add(int64(n)) < writebackEvery {
		return
	}
	w.pending.Store(0)
	select {
	case w.kick <- struct{}{}:
	default: // a start is pending already
	}
}

// stop ends the goroutine and waits for it, before the files are closed;
// a start asked for before it has run when it returns. note stays safe
// after it. Safe on a nil writeback and more
// than once.
func (w *writeback) stop() {
	if w == nil {
		return
	}
	w.once.Do(func() { close(w.quit) })
	<-w.done
}
