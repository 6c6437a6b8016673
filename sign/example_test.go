package sign_test

import (
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"time"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/sign"
)

// Sign a record for a sealed transcript and check it as a verifier would.
// The key comes from a fixed seed so the output is reproducible; real keys
// use crypto/rand.Reader.
func ExampleSign() {
	key, _ := sign.Generate(sign.Ed25519, mrand.NewChaCha8([32]byte{1}))
	signer, _ := sign.NewSigner(key)

	rec, err := sign.Build(sign.RecordOptions{
		IssuedAt:       time.Unix(1785000000, 0),
		Key:            signer.Public(),
		Digest:         canon.SHA256([]byte("the tracectl executable")),
		TranscriptHash: canon.SHA256([]byte("the transcript commitment")),
		CallCount:      2,
	})
	if err != nil {
		panic(err)
	}
	data, err := sign.Sign(rec, signer)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s\n", data)

	// A verifier: parse, verify the embedded signature, check trust.
	got, err := sign.ParseRecord(data)
	if err == nil {
		err = sign.VerifySignature(data, got)
	}
	if err == nil {
		err = sign.CheckTrust(got, signer.Public())
	}
	fmt.Println("verified:", err == nil)
	// Output:
	// {"appraisal":{"status":"none","verifier":"https://github.com/tracectl/tracectl"},"build_provenance":{"digest":"sha256:a54257e46c66c087bf201dcf67328011c9a7b09e08053c81d842dd9bd06be9ab","slsa_level":0},"cnf":{"jwk":{"crv":"Ed25519","kty":"OKP","x":"La3rpjyOoDqKCUz79x_1Ir22j-RYXlk4pC7MGLMiS3Q"}},"data_class":"internal","eat_profile":"tag:agentrust-io.com,2026:trace-v0.2","iat":1785000000,"model":{"model_id":"unknown","provider":"unknown"},"policy":{"bundle_hash":"sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855","enforcement_mode":"declared"},"runtime":{"measurement":"sha256:a54257e46c66c087bf201dcf67328011c9a7b09e08053c81d842dd9bd06be9ab","platform":"software-only"},"signature":"dgASxmmOcGbgr6tMbYIhu7sY30Bak-aBDOWu7Rkc9H8n7sUHPb4kRbMtV2qDGRmM952LmItnRKJE4MEjxJQPCg","subject":"spiffe://localhost/tracectl/unidentified-agent","tool_transcript":{"call_count":2,"hash":"sha256:602bd691d9a39c6c13578d994f9736d8b07780c71deaab8443c6b8698e154255"}}
	// verified: true
}

// The RFC 7638 thumbprint of the RFC 8037 example key (appendix A.3).
func ExampleJWK_Thumbprint() {
	j, err := sign.ParseJWK([]byte(`{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}`))
	if err != nil {
		panic(err)
	}
	tp, _ := j.Thumbprint()
	fmt.Println(tp)
	// Output: kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k
}

// ParseRecord reports every shape problem with its JSON Pointer.
func ExampleParseRecord() {
	data := []byte(`{"eat_profile":"tag:agentrust-io.com,2026:trace-v0.2","iat":1785000000,"subject":"alice",
		"model":{"provider":"p","model_id":"m"},
		"runtime":{"platform":"laptop","measurement":"sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		"policy":{"bundle_hash":"sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855","enforcement_mode":"declared"},
		"data_class":"internal",
		"build_provenance":{"slsa_level":0,"digest":"sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		"appraisal":{"status":"none","verifier":"https://example.com/v"},
		"cnf":{"jwk":{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo",
		                "d":"nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A"}}}`)
	_, err := sign.ParseRecord(data)
	var se *sign.ShapeError
	if errors.As(err, &se) {
		for _, p := range se.Problems {
			fmt.Printf("%s: %s\n", p.Pointer, p.Problem)
		}
	}
	fmt.Println(errors.Is(err, sign.ErrSchemaInvalid))
	// Output:
	// /subject: want spiffe://<host>/<path> or did:<method>:<id>
	// /runtime/platform: "laptop" is not one of intel-tdx, amd-sev-snp, azure-cvm-sev-snp, nvidia-h100, nvidia-blackwell, aws-nitro, arm-cca, google-confidential-space, tpm2, software-only
	// /cnf/jwk/d: private key member: must never appear
	// true
}
