package push

import "errors"

// ErrTargetRefused means the [Guard] refuses a push target: its URL at config
// creation, or a connection or redirect when a delivery is sent. The wrapping
// error says which host and why. Retrying does not help; a host that does not
// resolve is refused at config creation, but at send time it is an ordinary
// error, since DNS failures pass.
var ErrTargetRefused = errors.New("push target refused")
