package agent

import (
	"bytes"
	"image"
	_ "image/jpeg"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/config"
)

func TestCameraOnTheSimBoard(t *testing.T) {
	r := newRig(t, nil)
	res, sc := r.as(operator, "camera_take_photo", map[string]any{"resolution": "640x480"})
	if res.IsError || filepath.Dir(sc["file_path"].(string)) != r.cfg.Camera.MediaRoot || sc["size_bytes"].(float64) <= 0 {
		t.Fatalf("take_photo: %v", sc)
	}
	res, sc = r.as(operator, "camera_capture", map[string]any{"width": 640, "height": 480})
	if res.IsError || sc["inline"] != true || len(res.Content) != 2 {
		t.Fatalf("capture: %v", sc)
	}
	img, ok := res.Content[1].(*mcp.ImageContent)
	if !ok || img.MIMEType != "image/jpeg" {
		t.Fatalf("no image block: %#v", res.Content[1])
	}
	cfg, _, err := image.DecodeConfig(bytes.NewReader(img.Data))
	if err != nil || cfg.Width != 640 || cfg.Height != 480 {
		t.Fatalf("image: %+v %v", cfg, err)
	}
	if res, sc := r.as(Principal{Name: "bob", Role: RoleRead}, "camera_take_photo", nil); errCode(res, sc) != CodePermissionDenied {
		t.Fatalf("reader took a photo: %v", sc)
	}
	if res, sc := r.as(operator, "camera_capture", map[string]any{"width": 640, "height": 720}); errCode(res, sc) != CodeInvalidArgument {
		t.Fatalf("640x720: %v", sc)
	}
	if res, sc := r.as(operator, "camera_take_photo", map[string]any{"dry_run": true}); res.IsError || sc["file_path"] != "" {
		t.Fatalf("dry run: %v", sc)
	}
}

func TestCameraOffByDefaultAndSizeCap(t *testing.T) {
	r := newRig(t, func(c *config.Config) { c.Camera.Enabled = false })
	if res, sc := r.as(admin, "camera_take_photo", nil); errCode(res, sc) != CodePermissionDenied || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "[camera] enabled") {
		t.Fatalf("%v", sc)
	}
	r2 := newRig(t, func(c *config.Config) { c.Camera.MaxImageBytes = 1024 })
	res, sc := r2.as(admin, "camera_capture", map[string]any{"width": 1920, "height": 1080, "format": "png"})
	if res.IsError || sc["inline"] != false || !strings.Contains(sc["note"].(string), "max_image_bytes") || len(res.Content) != 1 {
		t.Fatalf("cap: %v", sc)
	}
}
