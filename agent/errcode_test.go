package agent

import (
	"testing"

	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

// TestErrorCodesAreTheHelpers: the codes live in internal/errcode (so the
// doors need not link the helper protocol) but must stay the helper's own
// strings, or a helper error would reach a model under a code the catalog
// does not know.
func TestErrorCodesAreTheHelpers(t *testing.T) {
	for _, c := range []struct{ ours, helper string }{
		{CodeInvalidArgument, proto.CodeInvalidArgument},
		{CodePermissionDenied, proto.CodePermissionDenied},
		{CodeNotFound, proto.CodeNotFound},
		{CodeFailedPrecondition, proto.CodeFailedPrecondition},
		{CodeResourceExhausted, proto.CodeResourceExhausted},
		{CodeUnavailable, proto.CodeUnavailable},
		{CodeInternal, proto.CodeInternal},
	} {
		if c.ours != c.helper {
			t.Errorf("code %q, the helper's is %q", c.ours, c.helper)
		}
	}
}
