// Package producer records MCP tool calls as evidence: the recorder API a
// Go agent runtime uses directly and the stdio proxy (wrap) uses, a durable
// append-only journal, and crash recovery (spec/transcript.md).
//
// API:
//
//	r, err := producer.Open(dir, producer.Options{Clock: time.Now, Entropy: rand.Reader, ...})
//	h, err := r.Attempt(ctx, producer.Call{Line: requestLine})  // durable before it returns: now dispatch
//	err = h.Response(responseLine)                                // durable before it returns: now deliver
//	// or h.TransportFailure(detail), h.Timeout(), h.CancelSent(), h.LateResponse(line)
//	h2, err := r.Retry(ctx, h, transcript.BasisCallerDeclared, producer.Call{Line: again})
//	id, err := r.RecordSnapshot(producer.Snapshot{...})          // a finished tools/list snapshot
//	err = r.RecordProtocol(producer.Protocol{...})
//	err = r.RecordNotification(producer.Notification{...})
//	sealed, err := r.Seal(ctx, signer)                           // or r.Close() and seal later
//
//	r, err = producer.Reopen(dir, opts)   // seal a closed bundle (tracectl seal)
//	r, err = producer.Recover(dir, opts)  // after a crash (tracectl seal --recover), then r.Seal
//
// What it guarantees:
//   - Identity: a fresh execution scope (a UUID from Options.Entropy) per
//     run; attempt ids a1, a2, ... unique in the scope and never reused,
//     also across concurrent callers and failed appends. JSON-RPC ids are
//     recorded with presence, type and exact text, never as attempt ids.
//   - Retries are new attempts with retry_of and a basis: caller_declared
//     (Retry, or the request's dev.tracectl/retryOf _meta naming an earlier
//     call's dev.tracectl/correlationId), continuation (a re-issue after an
//     input_required result), inferred (the same tool and canonical
//     arguments after an unknown outcome or a transport failure). The
//     earlier attempt and its outcome stay as they were.
//   - Honest outcomes: a response, a transport failure, or unknown (timeout,
//     cancellation, or an unknown resolution at seal or recovery). Nothing
//     is ever recorded as "did not run"; a late response is appended after
//     the timeout, which stays.
//   - Durability (the journal is transcript.jsonl itself): in strict mode
//     (the default) the attempt line is fsynced before Attempt returns and
//     a response line before Response returns; writes and fsyncs are each
//     group commits shared by concurrent callers, and AttemptWritten /
//     ResponseFrameWritten split the write from the durable wait so a
//     proxy reading the next frame shares the fsync too. When the last
//     group commit served more than one waiting call (calls are
//     concurrent), the next sync leader waits 1 ms before it fsyncs so
//     the lines written meanwhile share the fsync; a lone call never
//     waits. batch writes at once and fsyncs every BatchInterval; none
//     never fsyncs before Seal.
//     The mode is in the header. Payload bytes are appended to the payload
//     pack (payloads.pack, their final form) before the line that commits
//     to them, and the pack is fsynced with the journal wherever the
//     journal is: a durable line's payload is durable too.
//   - Privacy (transcript v3): payload commitments are salted (the salt is
//     kept beside the bytes and withheld with them); retained payloads are
//     redacted first (Options.Redact, package redact) and kept as their
//     redacted copy with the list of what it hides.
//   - Fail closed: a failed write (rolled back by truncation), fsync or
//     pack write makes the operation fail with ErrAuditUnavailable, and
//     every later one too. The caller must not dispatch or deliver.
//   - Exclusive custody: the bundle directory is created (mode 0700, never
//     reused), the journal exclusively (0600) and locked (flock) for as
//     long as a Recorder holds it; record.json is created exclusively and
//     atomically.
//   - Recovery appends and never rewrites: a torn final line is moved byte
//     for byte to quarantine/<sha256 hex> and named by a recovery event;
//     attempts without a terminal observation get an unknown resolution;
//     corruption before the last line fails closed.
//
// The library reads no clock, environment or random source of its own and
// prints nothing: Options carries the clock, the entropy and the file
// system (FS, so tests inject faults).
package producer
