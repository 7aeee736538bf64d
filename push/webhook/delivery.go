package webhook

import (
	"crypto/sha256"
	"encoding/base64"
)

// Header names of a delivery.
const (
	// HeaderSignature carries the delivery's JWT (see the package doc).
	HeaderSignature = "A2A-Push-Signature"
	// HeaderToken carries the push config's notification token, if it has one.
	HeaderToken = "A2A-Notification-Token"
	// HeaderTokenX carries the same token, for SDKs that read this name.
	HeaderTokenX = "X-A2A-Notification-Token"
	// HeaderDeliveryID carries the delivery id (the delivery_id claim), so a
	// receiver can drop a delivery it already handled without parsing the JWT.
	HeaderDeliveryID = "A2A-Push-Delivery-Id"
)

// Claims are the JWT claims of a delivery beside the registered ones (iss,
// aud, iat, exp, jti). The agent's signer writes them and [Verifier.Verify]
// reads them, so both sides agree on one form.
type Claims struct {
	// TaskID is the task the delivered event belongs to.
	TaskID string `json:"task_id"`
	// BodySHA256 is [BodyHash] of the delivery's body.
	BodySHA256 string `json:"body_sha256"`
	// DeliveryID is the same on every attempt of one delivery; the jti is
	// not, so a receiver refusing replayed jtis still takes a retry.
	DeliveryID string `json:"delivery_id"`
}

// BodyHash is the body_sha256 claim of body: unpadded base64url of SHA-256.
func BodyHash(body []byte) string {
	sum := sha256.Sum256(body)
	return base64.RawURLEncoding.EncodeToString(sum[:])
}
