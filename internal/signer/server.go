package signer

import (
	"context"
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/tracectl/tracectl/sign"
)

// connTimeout bounds one connection, request and response: a peer that
// stalls holds a slot no longer.
const connTimeout = 10 * time.Second

// maxConns bounds the connections served at once; more wait to be accepted.
const maxConns = 16

// Peer is a connected process's credentials.
type Peer struct {
	UID uint32
	PID int32
}

// Options configure a Server. Signer, Clock and Rate are required.
type Options struct {
	Signer sign.Signer
	// OwnUID is the server's own uid, always allowed; AllowUIDs are the
	// other uids served.
	OwnUID    uint32
	AllowUIDs []uint32
	Rate      Rate
	Clock     func() time.Time
	// Journal, when set, gets an Entry per signature before the signature
	// is returned.
	Journal *Journal
	// PeerOf returns a connection's credentials (nil: SO_PEERCRED, linux
	// only). Tests inject it to play a peer of another uid.
	PeerOf func(net.Conn) (Peer, error)
	// Report, when set, is told of each request served or refused.
	Report func(p Peer, op string, kind Kind, err error)
}

// Server signs statements for allowed peers.
type Server struct {
	o      Options
	pemKey string
	alg    sign.Alg
	thumb  string

	mu      sync.Mutex         // one signature at a time: the buckets and the journal
	buckets map[uint32]*bucket // one per peer uid: one recorder cannot spend another's rate
	broken  error              // a journal write failed: nothing is signed any more
}

// NewServer checks o and returns its server.
func NewServer(o Options) (*Server, error) {
	if o.Signer == nil || o.Clock == nil {
		return nil, errors.New("signer: Options.Signer and Options.Clock are required")
	}
	alg, err := algOf(o.Signer.Public())
	if err != nil {
		return nil, fmt.Errorf("signer: %w", err)
	}
	der, err := x509.MarshalPKIXPublicKey(o.Signer.Public())
	if err != nil {
		return nil, fmt.Errorf("signer: public key: %w", err)
	}
	thumb, err := sign.Thumbprint(o.Signer.Public())
	if err != nil {
		return nil, fmt.Errorf("signer: %w", err)
	}
	if _, err := newBucket(o.Rate, o.Clock()); err != nil {
		return nil, fmt.Errorf("signer: %w", err)
	}
	if o.PeerOf == nil {
		o.PeerOf = peerCred
	}
	return &Server{o: o, alg: alg, thumb: thumb, buckets: map[uint32]*bucket{},
		pemKey: string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))}, nil
}

// Serve accepts connections on l until ctx ends or l fails, serving each
// in its own goroutine (at most maxConns at once), and returns after every
// connection it started is done. It returns nil when ctx ended it.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	slots := make(chan struct{}, maxConns)
	for {
		slots <- struct{}{}
		c, err := l.Accept()
		if err != nil {
			<-slots
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("accept: %w", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			s.ServeConn(c)
		}()
	}
}

// ServeConn answers one request on c and closes it.
func (s *Server) ServeConn(c net.Conn) {
	defer c.Close()
	// An I/O deadline, not evidence: the real clock, never Options.Clock.
	_ = c.SetDeadline(time.Now().Add(connTimeout))
	peer, perr := s.o.PeerOf(c)
	var req request
	// The request is read before the peer is judged, so a refused peer
	// reads its refusal instead of a reset connection.
	rerr := readMessage(c, MaxRequestBytes, &req)
	resp, err := s.answer(peer, perr, &req, rerr)
	if s.o.Report != nil {
		s.o.Report(peer, req.Op, req.Kind, err)
	}
	var e *Error
	switch {
	case errors.As(err, &e):
		resp = &response{Error: e}
	case err != nil || resp == nil:
		resp = &response{Error: refuse(CodeUnavailable, "%v", err)}
	}
	resp.V = Version
	_ = writeMessage(c, resp)
}

func (s *Server) answer(peer Peer, perr error, req *request, rerr error) (*response, error) {
	switch {
	case perr != nil:
		return nil, refuse(CodePeerRefused, "peer credentials: %v", perr)
	case peer.UID != s.o.OwnUID && !slices.Contains(s.o.AllowUIDs, peer.UID):
		return nil, refuse(CodePeerRefused, "uid %d is not allowed (the server serves uid %d and --allow-uid)", peer.UID, s.o.OwnUID)
	case rerr != nil:
		return nil, refuse(CodeBadRequest, "%v", rerr)
	case req.V != Version:
		return nil, refuse(CodeBadRequest, "protocol version %d, want %d", req.V, Version)
	}
	switch req.Op {
	case opPublicKey:
		return &response{Alg: string(s.alg), PublicKey: s.pemKey}, nil
	case opSign:
		return s.sign(peer, req.Kind, req.Payload)
	}
	return nil, refuse(CodeBadRequest, "op %q: want %s or %s", req.Op, opSign, opPublicKey)
}

func (s *Server) sign(peer Peer, kind Kind, payload []byte) (*response, error) {
	if err := CheckStatement(kind, payload, s.o.Signer.Public()); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.broken != nil {
		return nil, refuse(CodeUnavailable, "the journal failed earlier (%v): restart the signer", s.broken)
	}
	now := s.o.Clock()
	b := s.buckets[peer.UID]
	if b == nil {
		b, _ = newBucket(s.o.Rate, now) // the rate was checked by NewServer
		s.buckets[peer.UID] = b
	}
	if ok, wait := b.take(now); !ok {
		return nil, refuse(CodeRateLimited, "over %s: the next signature in %s", s.o.Rate, wait.Round(time.Millisecond))
	}
	var sig []byte
	var err error
	if kind == KindRekor {
		ds, ok := s.o.Signer.(interface {
			SignDigest([]byte, crypto.Hash) ([]byte, error)
		})
		if !ok {
			return nil, refuse(CodeUnavailable, "this server's key cannot sign a digest (a key file can; a KMS key cannot)")
		}
		sig, err = ds.SignDigest(RekorDigest(s.alg, payload))
	} else {
		sig, err = s.o.Signer.SignRecordBytes(payload)
	}
	if err != nil {
		return nil, refuse(CodeUnavailable, "sign: %v", err)
	}
	if s.o.Journal != nil {
		sum := sha256.Sum256(payload)
		err := s.o.Journal.Append(Entry{Time: now.UTC().Format(time.RFC3339Nano), UID: peer.UID, PID: peer.PID,
			Kind: kind, SHA256: hex.EncodeToString(sum[:]), Key: s.thumb})
		if err != nil {
			s.broken = err
			return nil, refuse(CodeUnavailable, "%v: the signature is withheld", err)
		}
	}
	return &response{Signature: sig}, nil
}

// PublicKey is the key the server signs with.
func (s *Server) PublicKey() crypto.PublicKey { return s.o.Signer.Public() }
