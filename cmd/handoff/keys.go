package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/go-jose/go-jose/v4"

	"github.com/handoff-a2a/handoff/agentcard"
	"github.com/handoff-a2a/handoff/internal/auth"
)

// runKeys dispatches "handoff keys gen" and "handoff keys hash".
func runKeys(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("keys: want a subcommand: gen or hash")
	}
	switch args[0] {
	case "gen":
		return runKeysGen(args[1:], stdout)
	case "hash":
		return runKeysHash(args[1:], os.Stdin, stdout)
	case "-h", "--help", "help":
		printSynopses(stdout, "keys")
		return nil
	}
	return usagef("keys: unknown subcommand %q (want gen or hash)", args[0])
}

func runKeysGen(args []string, stdout io.Writer) error {
	fs := newFlagSet("keys gen", stdout)
	out := fs.String("out", "", "write the private JWK to `FILE` (mode 0600; an existing file is never overwritten)")
	alg := fs.String("alg", "EdDSA", "signature `ALG`: EdDSA (Ed25519) or ES256 (P-256)")
	kid := fs.String("kid", "", "the key's id, `KID`; default: the key's RFC 7638 thumbprint")
	jwks := fs.String("jwks", "", "also write the public key as a JWKS to `FILE`, for peers to pin")
	rest, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("keys gen: unexpected argument %q", rest[0])
	}
	if *out == "" {
		return usagef("keys gen: --out is required")
	}
	var a jose.SignatureAlgorithm
	switch strings.ToUpper(*alg) {
	case "EDDSA", "ED25519":
		a = jose.EdDSA
	case "ES256":
		a = jose.ES256
	default:
		return usagef("keys gen: --alg %q is not EdDSA or ES256", *alg)
	}
	key, err := agentcard.GenerateKey(a, *kid)
	if err != nil {
		return fmt.Errorf("generate key: %w", err)
	}
	if err := agentcard.WriteKeyFile(*out, key); err != nil {
		return err
	}
	if *jwks != "" {
		b, err := json.MarshalIndent(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{key.Public()}}, "", "  ")
		if err != nil {
			return fmt.Errorf("encode JWKS: %w", err)
		}
		if err := os.WriteFile(*jwks, append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("write JWKS: %w", err)
		}
	}
	fmt.Fprintf(stdout, "wrote %s (%s, kid %s)\n", *out, a, key.KeyID)
	return nil
}

func runKeysHash(args []string, stdin io.Reader, stdout io.Writer) error {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
		fmt.Fprintln(stdout, "Usage: handoff keys hash "+synopsis("keys hash")+"\n\nReads an API key on standard input (not as an argument, which\nwould show in the process list) and prints its SHA-256 for auth.api_keys.")
		return nil
	}
	if len(args) > 0 {
		return usagef("keys hash: the key is read from standard input, not from arguments")
	}
	line, err := bufio.NewReader(stdin).ReadString('\n')
	if err != nil && err != io.EOF {
		return fmt.Errorf("read key: %w", err)
	}
	key := strings.TrimRight(line, "\r\n")
	if key == "" {
		return usagef("keys hash: no key on standard input")
	}
	fmt.Fprintln(stdout, auth.HashAPIKey(key))
	return nil
}
