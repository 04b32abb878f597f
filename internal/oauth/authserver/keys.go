package authserver

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/scratchrun/scratchrun/internal/store"
)

// signingKey is the ES256 key access tokens are signed with; it is op's
// SigningKey.
type signingKey struct {
	id   string
	priv *ecdsa.PrivateKey
	pem  string
}

func (k signingKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.ES256 }
func (k signingKey) Key() any                                    { return k.priv }
func (k signingKey) ID() string                                  { return k.id }

// publicKey is the key set's one key (op.Key).
type publicKey struct{ k signingKey }

func (p publicKey) ID() string                         { return p.k.id }
func (p publicKey) Algorithm() jose.SignatureAlgorithm { return jose.ES256 }
func (p publicKey) Use() string                        { return "sig" }
func (p publicKey) Key() any                           { return &p.k.priv.PublicKey }

// loadSigningKey returns the key kept in st, offering a new one in case
// there is none yet: the first front end to start decides.
func loadSigningKey(ctx context.Context, st Storage) (signingKey, error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return signingKey{}, fmt.Errorf("generate OAuth signing key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return signingKey{}, fmt.Errorf("encode OAuth signing key: %w", err)
	}
	stored, err := st.OAuthSigningKey(ctx, store.OAuthSigningKey{
		ID: "es256-" + randomHex(8), Algorithm: string(jose.ES256),
		PrivatePEM: string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		Created:    time.Now(),
	})
	if err != nil {
		return signingKey{}, err
	}
	return parseSigningKey(stored)
}

func parseSigningKey(k store.OAuthSigningKey) (signingKey, error) {
	if k.Algorithm != string(jose.ES256) {
		return signingKey{}, fmt.Errorf("OAuth signing key %s: algorithm %q, want ES256", k.ID, k.Algorithm)
	}
	block, _ := pem.Decode([]byte(k.PrivatePEM))
	if block == nil {
		return signingKey{}, fmt.Errorf("OAuth signing key %s: not PEM", k.ID)
	}
	parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return signingKey{}, fmt.Errorf("OAuth signing key %s: %w", k.ID, err)
	}
	priv, ok := parsed.(*ecdsa.PrivateKey)
	if !ok || priv.Curve != elliptic.P256() {
		return signingKey{}, errors.New("OAuth signing key " + k.ID + ": not a P-256 key")
	}
	return signingKey{id: k.ID, priv: priv, pem: k.PrivatePEM}, nil
}

// randomToken is a fresh secret of n random bytes, URL-safe.
func randomToken(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// hashToken is how codes and refresh tokens are kept: they are 256-bit
// random (op's codes are AES-GCM sealed random ids), so a plain hash is
// enough.
func hashToken(t string) string {
	h := sha256.Sum256([]byte(t))
	return hex.EncodeToString(h[:])
}
