// Package push delivers task events to webhooks, signed. What a webhook
// owner needs to check a delivery is in the subpackage [webhook], which
// imports no store.
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
// card signing key, in the [webhook.HeaderSignature] header, with the
// claims [webhook.Claims] beside the registered ones (the package doc of
// [webhook] shows the whole JWT). The config's notification token, when it
// has one, travels beside it in [webhook.HeaderToken] and
// [webhook.HeaderTokenX], and the delivery id in [webhook.HeaderDeliveryID].
// The JWT is also the bearer token, unless the config's authentication
// gives its own scheme and credentials.
//
// A [Dispatcher] ([NewDispatcher], then [Dispatcher.Run]) delivers every
// event of a task's durable log to each of its push configs, in order,
// when [Dispatcher.Notify] says the task has new events. A delivery that
// fails is retried with backoff ([WithRetries], [WithBackoff]), then
// dead-lettered; [Statuses] says where each config's deliveries stand.
// [Dispatcher.Retry] is an operator's "retry now": it stores a request
// beside the config ([RetryStore]) that the config's own worker carries
// out, sending a dead letter once more or trying a retrying event without
// waiting out its backoff. The
// config's owner sees an HTTP status, a refusal by the guard, or
// [ReasonFailed] for every delivery that got no HTTP answer (refused,
// reset, timed out, TLS): which one it was would tell the owner what a
// port is doing. The operator's log says which.
//
// # Receiving
//
// A webhook owner imports [webhook] alone: its [webhook.Verifier] checks a
// delivery against the agent's published JWKS, and "handoff webhook listen"
// runs it and prints each verified event.
//
// # Replicas
//
// On a store that replicas share (the Redis store, tasks/redisstore) a [Dispatcher] takes
// its work from the store's queue (queue.go): each job goes to one replica,
// one replica at a time delivers a task, and a dead replica's jobs are
// claimed by another after [DefaultClaimIdle].
package push
