#!/usr/bin/env node
// verify-card.mjs URL_OR_FILE [--jwks URL] [--payload]
//
// Verifies an A2A Agent Card's signatures with the official JS SDK's own
// verifier, so Handoff's e2e tests (../jssdk_test.go) can check that what
// Handoff signs is what @a2a-js/sdk 1.x accepts.
//
// The SDK function used is verifyAgentCardSignature(retrievePublicKey) from
// "@a2a-js/sdk" (node_modules/@a2a-js/sdk/dist/index.js, src/signature.ts in
// the SDK's repository). For each entry of card.signatures it decodes the
// protected header, requires kid, typ and alg to be present, asks
// retrievePublicKey(kid, jku) for the key and runs jose.flattenedVerify over
// the detached payload canonicalizeAgentCard(card): the card round-tripped
// through the generated 1.0 protobuf types (AgentCard.fromJSON / toJSON,
// which drops every member outside the 1.0 schema and every proto default),
// without "signatures", with empty strings, nulls, empty lists and empty
// objects removed recursively, then serialised as RFC 8785 JSON. It resolves
// on the first entry that verifies and throws otherwise; the reason for each
// failed entry only goes to console.debug, which this script collects.
//
// The key: the SDK leaves fetching it to the caller. This script fetches the
// JWKS at --jwks URL when given, else at the protected header's jku, and
// hands the SDK the JWK whose kid matches. It applies no trust policy of its
// own: it checks the signature, not who may publish keys.
//
// Input: an http(s) URL is fetched (GET, Accept: application/json); anything
// else is read as a file.
//
// Output and exit code:
//   0  "verified kid=<kid>"                        the SDK accepted the card
//   1  "rejected: <SDK error>" plus one line per signature entry saying why
//      it failed, and the payload the SDK verified against (stderr)
//   2  usage error, or the card could not be read or is not a JSON object
//
// --payload prints the SDK's canonical payload (stdout) before verifying.

import { readFile } from "node:fs/promises";
import { canonicalizeAgentCard, verifyAgentCardSignature } from "@a2a-js/sdk";

const usage = "usage: node verify-card.mjs URL_OR_FILE [--jwks URL] [--payload]";

function fail(code, ...lines) {
  for (const line of lines) console.error(line);
  process.exit(code);
}

function parseArgs(argv) {
  const opts = { source: undefined, jwks: undefined, payload: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--jwks") {
      if (i + 1 >= argv.length) fail(2, "--jwks needs a URL", usage);
      opts.jwks = argv[++i];
    } else if (a.startsWith("--jwks=")) {
      opts.jwks = a.slice("--jwks=".length);
    } else if (a === "--payload") {
      opts.payload = true;
    } else if (a === "-h" || a === "--help") {
      console.log(usage);
      process.exit(0);
    } else if (a.startsWith("-")) {
      fail(2, `unknown flag ${a}`, usage);
    } else if (opts.source === undefined) {
      opts.source = a;
    } else {
      fail(2, `unexpected argument ${a}`, usage);
    }
  }
  if (opts.source === undefined) fail(2, usage);
  return opts;
}

const isURL = (s) => /^https?:\/\//i.test(s);

async function fetchJSON(url, what) {
  let res;
  try {
    res = await fetch(url, { headers: { Accept: "application/json" }, signal: AbortSignal.timeout(15000) });
  } catch (err) {
    throw new Error(`GET ${what} ${url}: ${err.cause?.message ?? err.message}`);
  }
  const body = await res.text();
  if (res.status !== 200) {
    throw new Error(`GET ${what} ${url}: HTTP ${res.status}: ${body.slice(0, 200).replace(/\s+/g, " ")}`);
  }
  try {
    return JSON.parse(body);
  } catch (err) {
    throw new Error(`${what} at ${url} is not JSON: ${err.message}`);
  }
}

async function readCard(source) {
  let card;
  try {
    card = isURL(source) ? await fetchJSON(source, "card") : JSON.parse(await readFile(source, "utf8"));
  } catch (err) {
    fail(2, `cannot read the card: ${err.message}`);
  }
  if (card === null || typeof card !== "object" || Array.isArray(card)) {
    fail(2, `the card at ${source} is not a JSON object`);
  }
  return card;
}

const opts = parseArgs(process.argv.slice(2));
const card = await readCard(opts.source);

if (opts.payload) {
  console.log(canonicalizeAgentCard(card));
}

// The SDK reports why each signature entry failed only through console.debug
// ("Signature verification on entry was not successful:", entry, error).
const entryFailures = [];
console.debug = (...args) => {
  const err = args.find((a) => a instanceof Error);
  entryFailures.push(err ? `${err.code ? err.code + ": " : ""}${err.message}` : args.map(String).join(" "));
};

const jwksCache = new Map(); // URL -> Promise of the JWKS
let lastKid; // the kid of the last key handed to the SDK: the one that verified, on success

async function retrievePublicKey(kid, jku) {
  const url = opts.jwks ?? jku;
  if (!url) {
    throw new Error(`signature kid=${kid} has no jku and no --jwks was given`);
  }
  if (!jwksCache.has(url)) jwksCache.set(url, fetchJSON(url, "JWKS"));
  const jwks = await jwksCache.get(url);
  if (!Array.isArray(jwks?.keys)) {
    throw new Error(`JWKS at ${url} has no "keys" list`);
  }
  const matches = jwks.keys.filter((k) => k && k.kid === kid);
  if (matches.length !== 1) {
    throw new Error(`JWKS at ${url} has ${matches.length} keys with kid ${JSON.stringify(kid)}, want 1`);
  }
  lastKid = kid;
  return matches[0];
}

try {
  await verifyAgentCardSignature(retrievePublicKey)(card);
} catch (err) {
  fail(
    1,
    `rejected: ${err.message}`,
    ...entryFailures.map((f, i) => `  signature entry ${i}: ${f}`),
    `  payload verified against (@a2a-js/sdk canonicalizeAgentCard): ${canonicalizeAgentCard(card)}`,
  );
}
console.log(`verified kid=${lastKid}`);
