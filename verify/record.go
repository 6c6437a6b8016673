package verify

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/sign"
)

// checkRecord runs the record checks in their order (spec/verification.md,
// "Check order"): profile, shape and canonicalization (sign.ParseRecord),
// signature, trust, freshness. It returns the parsed record, or nil when the
// record cannot be read as a v0.2 record; the later checks then do not run.
func (v *Verifier) checkRecord(r *Report, data []byte) *sign.Record {
	r.AcceptedProfiles = slices.Clone(v.o.AcceptProfiles)
	if p, ok := sign.PeekProfile(data); ok {
		r.Profile = p
		if !slices.Contains(v.o.AcceptProfiles, p) {
			r.add(CodeProfileUnsupported, checkRecord, StatusFail, "/eat_profile",
				fmt.Sprintf("eat_profile %s is not in the accepted set [%s]", boundedQuote(p), strings.Join(v.o.AcceptProfiles, ", ")))
			return nil
		}
	}
	rec, err := sign.ParseRecord(data)
	if err != nil {
		recordFindings(r, err)
		return nil
	}
	if tp, err := rec.Cnf.JWK.Thumbprint(); err == nil {
		r.Signer = tp
	}

	sigOK := false
	switch err := sign.VerifySignature(data, rec); {
	case err == nil:
		sigOK = true
		r.add(CodeSignatureValid, checkSignature, StatusPass, "/signature", "the signature verifies under cnf.jwk over the record's canonical bytes")
	case errors.Is(err, sign.ErrSignatureMissing):
		r.add(CodeSignatureMissing, checkSignature, StatusFail, "/signature", err.Error())
	case errors.Is(err, sign.ErrSignatureMalformed):
		r.add(CodeSignatureMalformed, checkSignature, StatusFail, "/signature", err.Error())
	default:
		r.add(CodeSignatureInvalid, checkSignature, StatusFail, "/signature", err.Error())
	}

	if v.o.TrustedKey == nil {
		// Options guarantee AllowEmbeddedKey here.
		r.add(CodeTrustedKeyMissing, checkTrust, StatusUnavailable, "/cnf/jwk",
			"no trusted key was given: the embedded key proves only that the record is internally consistent")
		if sigOK {
			r.TrustBasis = TrustEmbedded
		}
	} else {
		switch err := sign.CheckTrust(rec, v.o.TrustedKey); {
		case err == nil:
			r.add(CodeTrustedKeyMatch, checkTrust, StatusPass, "/cnf/jwk", "cnf.jwk has the trusted key's thumbprint "+r.Signer)
			if sigOK {
				r.TrustBasis = TrustKey
			}
		default:
			r.add(CodeCnfKeyMismatch, checkTrust, StatusFail, "/cnf/jwk", err.Error())
		}
	}

	v.checkFreshness(r, rec.IAT)
	return rec
}

// recordFindings maps a ParseRecord error to findings.
func recordFindings(r *Report, err error) {
	var se *sign.ShapeError
	var ce *canon.Error
	switch {
	case errors.As(err, &se):
		for _, p := range se.Problems {
			r.add(CodeSchemaInvalid, checkRecord, StatusFail, pointer(p.Pointer), p.Problem)
		}
	case errors.Is(err, sign.ErrProfileUnsupported):
		r.add(CodeProfileUnsupported, checkRecord, StatusFail, "/eat_profile", err.Error())
	case errors.Is(err, sign.ErrOriginPlatform):
		r.add(CodeOriginPlatform, checkRecord, StatusFail, "/runtime/platform", err.Error())
	case errors.Is(err, sign.ErrCanonicalization):
		subject := ""
		if errors.As(err, &ce) {
			subject = pointer(ce.Pointer)
		}
		r.add(CodeCanonicalizationFailed, checkRecord, StatusFail, subject, err.Error())
	default:
		// ErrMalformed and anything else: not a JSON object of any shape.
		r.add(CodeSchemaInvalid, checkRecord, StatusFail, `""`, err.Error())
	}
}

// pointer shows the whole-document pointer "" visibly.
func pointer(p string) string {
	if p == "" {
		return `""`
	}
	return p
}

// checkFreshness judges iat against the reference time: record_in_future
// beyond FutureSkew, record_stale beyond MaxAge (unless AllowAnyAge).
func (v *Verifier) checkFreshness(r *Report, iat int64) {
	issued := time.Unix(iat, 0).UTC()
	at := v.o.At
	if v.o.AtIssued {
		r.ReferenceTime = issued
		r.add(CodeRecordFresh, checkFreshness, StatusPass, "/iat",
			fmt.Sprintf("verified as of its own issue time %s (AtIssued, --at issued): its age today was not judged", issued.Format(time.RFC3339)))
		return
	}
	switch {
	case issued.After(at.Add(v.o.FutureSkew)):
		r.add(CodeRecordInFuture, checkFreshness, StatusFail, "/iat",
			fmt.Sprintf("issued %s, %s after the reference time %s (skew allowed: %s)", issued.Format(time.RFC3339), issued.Sub(at), at.UTC().Format(time.RFC3339), v.o.FutureSkew))
	case v.o.AllowAnyAge:
		r.add(CodeMaxAgeDisabled, checkFreshness, StatusInfo, "/iat",
			fmt.Sprintf("issued %s; the maximum age was disabled, so the record's age was not judged", issued.Format(time.RFC3339)))
	case at.Sub(issued) > v.o.MaxAge:
		r.add(CodeRecordStale, checkFreshness, StatusFail, "/iat",
			fmt.Sprintf("issued %s, %s before the reference time %s (maximum age %s); this says the record is old, not that it was tampered with: to check an archived record as of when it was issued use --at issued (Options.AtIssued), or allow its age with --max-age (for example %s; 0 for no limit)",
				issued.Format(time.RFC3339), at.Sub(issued).Round(time.Second), at.UTC().Format(time.RFC3339), v.o.MaxAge, suggestAge(at.Sub(issued))))
	default:
		r.add(CodeRecordFresh, checkFreshness, StatusPass, "/iat",
			fmt.Sprintf("issued %s, within %s of the reference time", issued.Format(time.RFC3339), v.o.MaxAge))
	}
}

// suggestAge is a --max-age value, in whole days, that admits age.
func suggestAge(age time.Duration) string {
	days := int64(age/(24*time.Hour)) + 1
	return fmt.Sprintf("%dd", days)
}
