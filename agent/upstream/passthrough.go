package upstream

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Resources and prompts are passed through live rather than cached: they are
// read rarely, and a live read cannot be stale. All of these are reads, so
// they get the read retry policy. An upstream without the capability has an
// empty list.

// Resources lists all of the upstream's resources, following pagination.
func (c *Client) Resources(ctx context.Context) ([]*mcp.Resource, error) {
	var out []*mcp.Resource
	err := c.invoke(ctx, "resources/list", true, func(ctx context.Context, s *session) error {
		out = nil
		if !s.hasRes {
			return nil
		}
		return paginate(func(cursor string) (string, error) {
			res, err := s.cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: cursor})
			if err != nil {
				return "", err
			}
			out = append(out, res.Resources...)
			return res.NextCursor, checkLen(len(out))
		})
	})
	return out, err
}

// ResourceTemplates lists all of the upstream's resource templates.
func (c *Client) ResourceTemplates(ctx context.Context) ([]*mcp.ResourceTemplate, error) {
	var out []*mcp.ResourceTemplate
	err := c.invoke(ctx, "resources/templates/list", true, func(ctx context.Context, s *session) error {
		out = nil
		if !s.hasRes {
			return nil
		}
		return paginate(func(cursor string) (string, error) {
			res, err := s.cs.ListResourceTemplates(ctx, &mcp.ListResourceTemplatesParams{Cursor: cursor})
			if err != nil {
				return "", err
			}
			out = append(out, res.ResourceTemplates...)
			return res.NextCursor, checkLen(len(out))
		})
	})
	return out, err
}

// ReadResource reads one resource by URI.
func (c *Client) ReadResource(ctx context.Context, uri string) (*mcp.ReadResourceResult, error) {
	var out *mcp.ReadResourceResult
	err := c.invoke(ctx, fmt.Sprintf("resources/read %q", uri), true, func(ctx context.Context, s *session) error {
		r, err := s.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		out = r
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Prompts lists all of the upstream's prompts, following pagination.
func (c *Client) Prompts(ctx context.Context) ([]*mcp.Prompt, error) {
	var out []*mcp.Prompt
	err := c.invoke(ctx, "prompts/list", true, func(ctx context.Context, s *session) error {
		out = nil
		if !s.hasPrompts {
			return nil
		}
		return paginate(func(cursor string) (string, error) {
			res, err := s.cs.ListPrompts(ctx, &mcp.ListPromptsParams{Cursor: cursor})
			if err != nil {
				return "", err
			}
			out = append(out, res.Prompts...)
			return res.NextCursor, checkLen(len(out))
		})
	})
	return out, err
}

// GetPrompt renders one prompt with its arguments.
func (c *Client) GetPrompt(ctx context.Context, name string, args map[string]string) (*mcp.GetPromptResult, error) {
	var out *mcp.GetPromptResult
	err := c.invoke(ctx, fmt.Sprintf("prompts/get %q", name), true, func(ctx context.Context, s *session) error {
		r, err := s.cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: name, Arguments: args})
		out = r
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
