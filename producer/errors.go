package producer

import "errors"

// Errors. Callers test them with errors.Is; several wrap the cause as well
// (errors.Is(err, syscall.ENOSPC) works on an ErrAuditUnavailable).
var (
	// ErrAuditUnavailable: evidence could not be made durable (a write, an
	// fsync or a blob failed). The operation it came from did not happen as
	// far as the evidence goes: the caller must not dispatch the call (from
	// Attempt) or deliver the response as an ordinary result (from an
	// observation). It is sticky: every later operation fails the same way.
	ErrAuditUnavailable = errors.New("audit unavailable: evidence could not be made durable, do not dispatch")
	// ErrBundleExists: Open never reuses a directory.
	ErrBundleExists = errors.New("bundle directory already exists")
	// ErrClosed: the recorder was closed or sealed.
	ErrClosed = errors.New("recorder is closed")
	// ErrSealOnly: a reopened or recovered recorder only seals; a scope whose
	// producer stopped records no new attempts.
	ErrSealOnly = errors.New("recorder was reopened to seal: it records nothing new")
	// ErrSealed: the bundle already has its record.json.
	ErrSealed = errors.New("bundle is already sealed")
	// ErrNeedsRecovery: the journal ends in a torn line; only Recover (tracectl
	// seal --recover) may quarantine it.
	ErrNeedsRecovery = errors.New("journal ends in a torn line: recovery needed")
	// ErrCorrupt: the journal is invalid before its last line; recovery never
	// guesses past corruption.
	ErrCorrupt = errors.New("journal is corrupt")
	// ErrNotToolCall: the request line is not a tools/call request the
	// recorder can read (JSON with method tools/call and at most one id).
	// Nothing was recorded.
	ErrNotToolCall = errors.New("not a tools/call request")
	// ErrObservation: the observation does not fit the attempt's history
	// (a second terminal observation, a late response without a timeout or
	// cancellation before it). Nothing was recorded.
	ErrObservation = errors.New("observation does not fit the attempt")
	// ErrUnknownAttempt: a handle or retry target from another recorder.
	ErrUnknownAttempt = errors.New("attempt not recorded by this recorder")
	// ErrInvalidOptions: Options are unusable.
	ErrInvalidOptions = errors.New("invalid recorder options")
	// ErrInvalidInput: a call's inputs are unusable (an unknown snapshot id,
	// a notification without a method, an unknown retry basis). Nothing was
	// recorded.
	ErrInvalidInput = errors.New("invalid input")
)

var errNoMethod = errors.New("no readable method")

type notToolCall struct{ why string }

func (e *notToolCall) Error() string { return ErrNotToolCall.Error() + ": " + e.why }
func (e *notToolCall) Unwrap() error { return ErrNotToolCall }
