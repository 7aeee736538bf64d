// Package webhook checks push notifications an agent signed, for the owner of
// the webhook that receives them. It imports neither the task engine nor any
// store (layout_test.go keeps it so), so a receiver pulls in only go-jose and
// the JWKS fetcher.
//
// A webhook owner needs no shared secret: a [Verifier] fetches the agent's
// JWKS (<agent>/.well-known/jwks.json) and checks the signature, the
// audience, the age, the body hash, the token and that the delivery was not
// seen before. Its [Verifier.Middleware] wraps any http.Handler:
//
//	v := webhook.NewVerifier("https://agent.example/.well-known/jwks.json",
//		"https://hooks.example/a2a", webhook.WithToken(token))
//	http.Handle("POST /a2a", v.Middleware(handler)) // handler: webhook.VerifiedFrom(r.Context())
//
// "handoff webhook listen" runs exactly this and prints each verified event.
//
// # What a delivery carries
//
// The agent's signer (package push) and this verifier share one definition
// of the wire form: the headers ([HeaderSignature], [HeaderToken],
// [HeaderTokenX], [HeaderDeliveryID]) and the JWT claims beside the
// registered ones ([Claims], with [BodyHash]):
//
//	header  {"alg": "EdDSA", "kid": "...", "typ": "JWT"}
//	claims  {"iss": agent, "aud": webhook URL, "iat", "exp": iat+5m,
//	         "jti": delivery id + "#" + random, "delivery_id", "task_id",
//	         "body_sha256": base64url(SHA-256(body))}
package webhook
