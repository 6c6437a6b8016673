package producer

// RecordClientGone notes that the client of a proxied session went away (a
// write to it failed): what the server sent afterwards is still recorded,
// but was not delivered.
//
// TODO(lead): journal line. Until the transcript format has a line for it,
// the detail is kept on the Recorder (ClientGoneDetail) and not committed.
func (r *Recorder) RecordClientGone(detail string) error {
	r.goneMu.Lock()
	defer r.goneMu.Unlock()
	if r.clientGone == "" {
		r.clientGone = detail
	}
	return nil
}

// ClientGoneDetail is the detail of the first RecordClientGone, or "".
func (r *Recorder) ClientGoneDetail() string {
	r.goneMu.Lock()
	defer r.goneMu.Unlock()
	return r.clientGone
}
