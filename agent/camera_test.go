package agent

import (
	"bytes"
	"encoding/base64"
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
	// The same bytes, base64, in image_data (the tool catalog's result); the text
	// block leaves them out, as the image block already carries them.
	if b, err := base64.StdEncoding.DecodeString(sc["image_data"].(string)); err != nil || !bytes.Equal(b, img.Data) {
		t.Fatalf("image_data does not match the image block: %v", err)
	}
	if txt := res.Content[0].(*mcp.TextContent).Text; strings.Contains(txt, "image_data") || !strings.Contains(txt, `"inline":true`) {
		t.Fatalf("text block: %.300s", txt)
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
	if res.IsError || sc["inline"] != false || !strings.Contains(sc["note"].(string), "max_image_bytes") || len(res.Content) != 1 || sc["image_data"] != nil {
		t.Fatalf("cap: %v", sc)
	}
}

func TestPhotoPublicURL(t *testing.T) {
	r := newRig(t, func(c *config.Config) { c.Camera.PublicURL = "http://pi.local/media/" })
	res, sc := r.as(operator, "camera_take_photo", map[string]any{"resolution": "640x480"})
	want := "http://pi.local/media/" + filepath.Base(sc["file_path"].(string))
	if res.IsError || sc["public_url"] != want {
		t.Fatalf("public_url: %v, want %s", sc, want)
	}
	if _, sc := newRig(t, nil).as(operator, "camera_take_photo", nil); sc["public_url"] != nil {
		t.Fatalf("public_url without configuration: %v", sc)
	}
	if publicURL("https://x/m", "/media", "/etc/passwd") != "" || publicURL("https://x/m", "/media", "/media/a b.jpg") != "https://x/m/a%20b.jpg" {
		t.Fatal("publicURL outside the root or unescaped")
	}
}
