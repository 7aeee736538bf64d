// Package push delivers task events to webhooks, signed, and gives webhook
// owners what they need to check a delivery.
//
// # Sending
//
// A push target is checked twice by a [Guard], which is on by default: once
// when its config is created ([Guard.CheckURL]: https only, and no address
// that is not globally reachable, in any IPv4 or IPv6 form, unless the host
// is allow-listed), and again at every connection ([Guard.Client]), on the
// address actually dialled, so a name that resolves elsewhere later (DNS
// rebinding) or a redirect cannot reach what the first check refused.
//
// Every delivery carries a JWT made by a [Signer] with the agent's current
// card signing key, in the [HeaderSignature] header:
//
//	header  {"alg": "EdDSA", "kid": "...", "typ": "JWT"}
//	claims  {"iss": agent, "aud": webhook URL, "iat", "exp": iat+5m,
//	         "jti": delivery id, "task_id", "body_sha256": base64url(SHA-256(body))}
//
// The config's notification token, when it has one, travels beside it in
// [HeaderToken] and [HeaderTokenX], and the delivery id in [HeaderDeliveryID].
// The JWT is also the bearer token, unless the config's authentication
// gives its own scheme and credentials.
//
// A delivery that fails is retried with backoff, then dead-lettered. The
// config's owner sees an HTTP status, a refusal by the guard, or
// [ReasonFailed] for every delivery that got no HTTP answer (refused,
// reset, timed out, TLS): which one it was would tell the owner what a
// port is doing. The operator's log says which.
//
// # Receiving
//
// A webhook owner needs no shared secret: a [Verifier] fetches the agent's
// JWKS (<agent>/.well-known/jwks.json) and checks the signature, the
// audience, the age, the body hash, the token and that the delivery was not
// seen before. Its [Verifier.Middleware] wraps any http.Handler:
//
//	v := push.NewVerifier("https://agent.example/.well-known/jwks.json",
//		"https://hooks.example/a2a", push.WithToken(token))
//	http.Handle("POST /a2a", v.Middleware(handler)) // handler: push.VerifiedFrom(r.Context())
//
// "handoff webhook listen" runs exactly this and prints each verified event.
//
// # Replicas
//
// On a store that replicas share ([tasks.RedisStore]) a [Dispatcher] takes
// its work from the store's queue (queue.go): each job goes to one replica,
// one replica at a time delivers a task, and a dead replica's jobs are
// claimed by another after [DefaultClaimIdle].
package push
