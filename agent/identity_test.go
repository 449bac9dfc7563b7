package agent

import "github.com/raspi-mcp/raspi-mcp/internal/identity"

// Short names for the tests, which build principals by the dozen. The agent
// itself uses package identity directly.
type (
	Principal = identity.Principal
	Role      = identity.Role
)

const (
	RoleNone    = identity.RoleNone
	RoleRead    = identity.RoleRead
	RoleOperate = identity.RoleOperate
	RoleAdmin   = identity.RoleAdmin
)
