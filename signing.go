package handoff

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/handoff-a2a/handoff/agentcard"
	"github.com/handoff-a2a/handoff/internal/datadir"
)

// Paths of the signing material under the base URL and the data directory.
const (
	pathJWKS       = "/.well-known/jwks.json"
	defaultKeyFile = datadir.SigningKey
)

// loadKeySet reads the configured signing keys. With none configured it uses
// DataDir/signing-key.jwk, creating an Ed25519 key there on the first start
// and never overwriting one.
func loadKeySet(c *Config, log *slog.Logger) (*agentcard.KeySet, error) {
	var keys []agentcard.Key
	for _, k := range c.Signing.Keys {
		jwk, err := agentcard.LoadKeyFile(k.File)
		if err != nil {
			return nil, fmt.Errorf("%s: signing key: %w", c.path, err)
		}
		keys = append(keys, agentcard.Key{JWK: jwk, NotBefore: k.NotBefore, RetiredAt: k.RetiredAt})
	}
	if len(keys) == 0 {
		path := filepath.Join(c.DataDir, defaultKeyFile)
		jwk, err := agentcard.LoadKeyFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			if jwk, err = agentcard.GenerateKey(jose.EdDSA, ""); err != nil {
				return nil, fmt.Errorf("generate signing key: %w", err)
			}
			if err = agentcard.WriteKeyFile(path, jwk); err != nil {
				return nil, fmt.Errorf("write signing key: %w", err)
			}
			log.Info("created a signing key for the card", slog.String("file", path), slog.String("kid", jwk.KeyID))
		}
		if err != nil {
			return nil, fmt.Errorf("signing key: %w", err)
		}
		keys = append(keys, agentcard.Key{JWK: jwk})
	}
	set, err := agentcard.NewKeySet(c.Signing.RetiredKeep.Duration, keys...)
	if err != nil {
		return nil, fmt.Errorf("%s: signing keys: %w", c.path, err)
	}
	if _, err := set.SigningKey(time.Now()); err != nil {
		return nil, fmt.Errorf("%s: signing keys: %w", c.path, err)
	}
	return set, nil
}
