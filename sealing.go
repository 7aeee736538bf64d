package handoff

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/handoff-a2a/handoff/agentcard"
	"github.com/handoff-a2a/handoff/tasks"
)

// storeSealer returns the sealer of push configs' secrets: from
// store.secret_key_files when set, otherwise from the signing keys (the one
// signing now seals, every configured one opens). Replicas on Redis must
// share the secrets, so there it refuses to fall back on a key that only
// this replica's data directory holds.
func storeSealer(cfg *Config, keys *agentcard.KeySet) (*tasks.Sealer, error) {
	if len(cfg.Store.SecretKeyFiles) > 0 {
		var secrets [][]byte
		for _, f := range cfg.Store.SecretKeyFiles {
			b, err := os.ReadFile(f)
			if err != nil {
				return nil, fmt.Errorf("%s: store.secret_key_files: %w", cfg.path, err)
			}
			if len(b) < tasks.MinSecretBytes {
				return nil, fmt.Errorf("%s: store.secret_key_files: %s holds %d bytes, under the minimum of %d", cfg.path, f, len(b), tasks.MinSecretBytes)
			}
			secrets = append(secrets, b)
		}
		return newSealer(cfg, secrets)
	}
	files := make([]string, 0, len(cfg.Signing.Keys))
	for _, k := range cfg.Signing.Keys {
		files = append(files, k.File)
	}
	if len(files) == 0 {
		if cfg.Store.Kind == "redis" {
			return nil, errors.New(cfg.path + ": store: kind redis needs store.secret_key_files or signing.keys, shared by every replica: they seal push configs' secrets, and a key in one replica's data directory cannot open what another sealed")
		}
		files = append(files, filepath.Join(cfg.DataDir, defaultKeyFile))
	}
	signing, err := keys.SigningKey(time.Now())
	if err != nil {
		return nil, fmt.Errorf("%s: signing keys: %w", cfg.path, err)
	}
	var first []byte
	var rest [][]byte
	for _, f := range files {
		jwk, err := agentcard.LoadKeyFile(f)
		if err != nil {
			return nil, fmt.Errorf("%s: signing key: %w", cfg.path, err)
		}
		secret, err := keySecret(jwk)
		if err != nil {
			return nil, fmt.Errorf("%s: signing key %s: %w", cfg.path, f, err)
		}
		if jwk.KeyID == signing.KeyID && first == nil {
			first = secret
			continue
		}
		rest = append(rest, secret)
	}
	if first == nil { // not expected: the key set was made from these files
		return nil, fmt.Errorf("%s: signing key %s is in no configured file", cfg.path, signing.KeyID)
	}
	return newSealer(cfg, append([][]byte{first}, rest...))
}

func newSealer(cfg *Config, secrets [][]byte) (*tasks.Sealer, error) {
	s, err := tasks.NewSealer(secrets...)
	if err != nil {
		return nil, fmt.Errorf("%s: store: %w", cfg.path, err)
	}
	return s, nil
}

// keySecret is a private JWK's JSON form, private members included: the
// sealer derives its key from it by HKDF, so the signing key itself is
// never used to encrypt.
func keySecret(jwk *jose.JSONWebKey) ([]byte, error) {
	if jwk.IsPublic() {
		return nil, errors.New("a public key cannot seal")
	}
	b, err := jwk.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	return b, nil
}
