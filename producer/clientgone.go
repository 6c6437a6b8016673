package producer

import "github.com/tracectl/tracectl/transcript"

// RecordClientGone records, once, that the client of a proxied session went
// away (a write to it failed): a session line (client_gone). What the
// server sends afterwards is still recorded, but is not delivered.
func (r *Recorder) RecordClientGone(detail string) error {
	r.gone.mu.Lock()
	if r.gone.detail != "" {
		r.gone.mu.Unlock()
		return nil
	}
	if detail == "" {
		detail = "the client went away"
	}
	r.gone.detail = detail
	r.gone.mu.Unlock()
	if err := r.begin(true); err != nil {
		return err
	}
	defer r.ops.Done()
	ev := &transcript.SessionEvent{Event: transcript.SessionClientGone, Detail: transcript.Detail(detail)}
	_, err := r.j.append(r.lineOf(func(s, at int64) { ev.Seq, ev.AtMs = s, at }, ev))
	return err
}
