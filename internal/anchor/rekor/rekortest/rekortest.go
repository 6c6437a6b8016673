// Package rekortest is an in-memory Rekor v2 log for tests, built from
// rekor-tiles' and sigstore's own pieces: requests are validated and turned
// into entries by rekor-tiles' hashedrekord.ToLogEntry (the server's code
// path), canonicalized as the server does (RFC 8785), checkpoints are
// signed by rekor-tiles' note signer and log ids are its KeyHash. It
// serves rekor-tiles' write API (POST /api/v2/log/entries) and writes the
// sigstore trusted root naming it. Only tests import it.
package rekortest

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/x509"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/cyberphone/json-canonicalization/go/src/webpki.org/jsoncanonicalizer"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	pbs "github.com/sigstore/protobuf-specs/gen/pb-go/rekor/v1"
	prototrustroot "github.com/sigstore/protobuf-specs/gen/pb-go/trustroot/v1"
	pb "github.com/sigstore/rekor-tiles/v2/pkg/generated/protobuf"
	rnote "github.com/sigstore/rekor-tiles/v2/pkg/note"
	"github.com/sigstore/rekor-tiles/v2/pkg/types/hashedrekord"
	"github.com/sigstore/sigstore/pkg/signature"
	f_log "github.com/transparency-dev/formats/log"
	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/merkle/testonly"
	"golang.org/x/mod/sumdb/note"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Log is an in-memory Rekor v2 log. Its origin is the host of its base
// URL, as Rekor's is (sigstore-go builds the note verifier from the trusted
// root's baseUrl host).
type Log struct {
	BaseURL string
	Origin  string
	Key     ed25519.PrivateKey

	mu    sync.Mutex
	tree  *testonly.Tree
	sig   note.Signer
	logID []byte
	reg   *signature.AlgorithmRegistryConfig
}

// New returns a log whose checkpoints key is derived from seed (32 bytes)
// and whose origin is origin (the host of baseURL).
func New(baseURL, origin string, seed []byte) (*Log, error) {
	key := ed25519.NewKeyFromSeed(seed)
	sv, err := signature.LoadSigner(key, crypto.Hash(0))
	if err != nil {
		return nil, err
	}
	ns, err := rnote.NewNoteSigner(context.Background(), origin, sv)
	if err != nil {
		return nil, err
	}
	_, logID, err := rnote.KeyHash(origin, key.Public())
	if err != nil {
		return nil, err
	}
	reg, err := signature.NewAlgorithmRegistryConfig([]protocommon.PublicKeyDetails{
		protocommon.PublicKeyDetails_PKIX_ED25519_PH,
		protocommon.PublicKeyDetails_PKIX_ECDSA_P256_SHA_256,
		protocommon.PublicKeyDetails_PKIX_ECDSA_P384_SHA_384,
	})
	if err != nil {
		return nil, err
	}
	return &Log{BaseURL: baseURL, Origin: origin, Key: key, tree: testonly.New(rfc6962.DefaultHasher), sig: ns, logID: logID, reg: reg}, nil
}

// AddLeaf appends raw bytes as an entry (for a tree with other entries).
func (l *Log) AddLeaf(b []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tree.AppendData(b)
}

// Add integrates a hashedrekord request as the server does and returns the
// TransparencyLogEntry with an inclusion proof under a new checkpoint.
func (l *Log) Add(req *pb.HashedRekordRequestV002) (*pbs.TransparencyLogEntry, error) {
	entry, err := hashedrekord.ToLogEntry(req, l.reg)
	if err != nil {
		return nil, err
	}
	serialized, err := protojson.Marshal(entry)
	if err != nil {
		return nil, err
	}
	body, err := jsoncanonicalizer.Transform(serialized)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	idx := l.tree.Size()
	l.tree.AppendData(body)
	size := l.tree.Size()
	path, err := l.tree.InclusionProof(idx, size)
	if err != nil {
		return nil, err
	}
	cp := f_log.Checkpoint{Origin: l.Origin, Size: size, Hash: l.tree.Hash()}
	signed, err := note.Sign(&note.Note{Text: string(cp.Marshal())}, l.sig)
	if err != nil {
		return nil, err
	}
	return &pbs.TransparencyLogEntry{
		LogIndex:    int64(idx),
		LogId:       &protocommon.LogId{KeyId: l.logID},
		KindVersion: &pbs.KindVersion{Kind: entry.Kind, Version: entry.ApiVersion},
		InclusionProof: &pbs.InclusionProof{
			LogIndex:   int64(idx),
			RootHash:   cp.Hash,
			TreeSize:   int64(size),
			Hashes:     path,
			Checkpoint: &pbs.Checkpoint{Envelope: string(signed)},
		},
		CanonicalizedBody: body,
	}, nil
}

// ServeHTTP is rekor-tiles' write API: POST /api/v2/log/entries with a
// CreateEntryRequest (protojson), answered 201 with the entry.
func (l *Log) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/api/v2/log/entries" {
		http.NotFound(w, r)
		return
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req pb.CreateEntryRequest
	if err := protojson.Unmarshal(b, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	e, err := l.Add(req.GetHashedRekordRequestV002())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	out, err := protojson.Marshal(e)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(out)
}

// TrustedRoot is a sigstore TrustedRoot (JSON) naming the log: its base
// URL, its checkpoint key and log id.
func (l *Log) TrustedRoot() ([]byte, error) {
	return TrustedRoot(l.BaseURL, l.Key.Public().(ed25519.PublicKey), l.logID)
}

// TrustedRoot is a sigstore TrustedRoot (JSON) with one Rekor v2 log: an
// checkpoint key and its log id (rekor-tiles' KeyHash of origin and key).
func TrustedRoot(baseURL string, pub crypto.PublicKey, logID []byte) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	details := protocommon.PublicKeyDetails_PKIX_ED25519
	if _, ok := pub.(ed25519.PublicKey); !ok {
		details = protocommon.PublicKeyDetails_PKIX_ECDSA_P256_SHA_256
	}
	tr := &prototrustroot.TrustedRoot{
		MediaType: "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
		Tlogs: []*prototrustroot.TransparencyLogInstance{{
			BaseUrl:       baseURL,
			HashAlgorithm: protocommon.HashAlgorithm_SHA2_256,
			PublicKey: &protocommon.PublicKey{
				RawBytes:   der,
				KeyDetails: details,
				ValidFor:   &protocommon.TimeRange{Start: timestamppb.New(epoch)},
			},
			LogId: &protocommon.LogId{KeyId: logID},
		}},
	}
	return protojson.MarshalOptions{Multiline: true}.Marshal(tr)
}

// epoch is the start of the log key's validity in the trusted root: a
// fixed date, so no test reads the clock.
var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
