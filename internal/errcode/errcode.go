// Package errcode is the vocabulary of error codes a client sees: the
// symbolic codes of the tool catalog (spec 002 §9.1), whose meaning must
// stay stable. It is its own package, with no imports, so that the agent's
// doors (agent/transport) can speak the same words as its tools without
// linking the tools, or the helper protocol whose codes these are too
// (privhelper/proto; agent's tests hold the two to the same strings).
package errcode

// The codes.
const (
	InvalidArgument    = "invalid_argument"
	PermissionDenied   = "permission_denied"
	Unauthenticated    = "unauthenticated" // HTTP tokens only; the helper never says it
	NotFound           = "not_found"
	FailedPrecondition = "failed_precondition"
	ResourceExhausted  = "resource_exhausted"
	Unavailable        = "unavailable"
	Internal           = "internal"
)
