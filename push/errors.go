package push

import "errors"

// ErrTargetRefused means the [Guard] refuses a push target: its URL at config
// creation, or a connection or redirect when a delivery is sent. The wrapping
// error says which host and why. Retrying does not help; a host that does not
// resolve is refused at config creation, but at send time it is an ordinary
// error, since DNS failures pass.
var ErrTargetRefused = errors.New("push target refused")

// ErrNothingToRetry means [Dispatcher.Retry] was asked for an event that is
// neither a dead letter nor being retried (or, for all of a config's, that
// it has none).
var ErrNothingToRetry = errors.New("nothing to retry")

// ErrRetryUnsupported means the dispatcher's store keeps no requests to
// retry: it is not a [RetryStore].
var ErrRetryUnsupported = errors.New("the store cannot keep requests to retry")
