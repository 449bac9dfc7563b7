// Package bearer keeps the HTTP endpoint's bearer tokens: each has a name
// and a role, is created and revoked on the device ("raspi-mcp token ...")
// and never over MCP, and is stored only as a hash of its secret, so the
// file that lists them grants nothing to whoever reads it.
package bearer

import (
	"errors"
	"time"
)

// Roles a token may carry. RoleMetrics may only scrape /metrics; the others
// are the MCP roles of [roles] (and may scrape too).
const (
	RoleRead    = "read"
	RoleOperate = "operate"
	RoleAdmin   = "admin"
	RoleMetrics = "metrics"
)

// Token is one token as listed: everything but its secret.
type Token struct {
	Name string
	Role string
	// Profile narrows Role to a profile of the config ([profiles], or a
	// built-in one); "" narrows nothing. The agent looks the profile up in
	// its config at each call.
	Profile string
	Created time.Time
	// Expires is when the token stops working; zero: never.
	Expires time.Time
}

// Errors of Verify. A revoked token is ErrUnknown: once revoked it is gone.
var (
	ErrUnknown = errors.New("bearer: unknown or revoked token")
	ErrExpired = errors.New("bearer: token expired")
)
