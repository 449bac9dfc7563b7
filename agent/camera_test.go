package agent

import (
	"bytes"
	"encoding/base64"
	"image"
	_ "image/jpeg"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/config"
)

// saved checks what a saved photo's result says about the file (in the
// media root, not empty, taken at a time), then clears the fields that
// depend on the clock, the random name and the encoder, so the rest
// compares whole.
func saved(t *testing.T, r *rig, p cameraTakePhotoOut) cameraTakePhotoOut {
	t.Helper()
	if filepath.Dir(p.FilePath) != r.cfg.Camera.MediaRoot || p.SizeBytes <= 0 {
		t.Fatalf("photo not saved under the media root: %+v", p)
	}
	if _, err := time.Parse(time.RFC3339, p.Timestamp); err != nil {
		t.Fatalf("timestamp: %v", err)
	}
	p.FilePath, p.SizeBytes, p.Timestamp = "", 0, ""
	return p
}

func TestCameraOnTheSimBoard(t *testing.T) {
	r := newRig(t, nil)
	photo, _ := callAs[cameraTakePhotoOut](t, r, operator, "camera_take_photo", map[string]any{"resolution": "640x480"})
	diff(t, "take_photo", cameraTakePhotoOut{Width: 640, Height: 480, Format: "jpeg"}, saved(t, r, photo))

	res := r.call(t, operator, "camera_capture", map[string]any{"width": 640, "height": 480})
	capture, _ := decodeResult[cameraCaptureOut](t, res)
	capture.cameraTakePhotoOut = saved(t, r, capture.cameraTakePhotoOut)
	diff(t, "capture", cameraCaptureOut{cameraTakePhotoOut: cameraTakePhotoOut{Width: 640, Height: 480, Format: "jpeg"}, Inline: true}, capture,
		cmpopts.IgnoreFields(cameraCaptureOut{}, "ImageData"), cmpopts.IgnoreUnexported(cameraCaptureOut{}))
	if len(res.Content) != 2 {
		t.Fatalf("capture: %d content blocks, want text and image", len(res.Content))
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
	if b, err := base64.StdEncoding.DecodeString(capture.ImageData); err != nil || !bytes.Equal(b, img.Data) {
		t.Fatalf("image_data does not match the image block: %v", err)
	}
	if txt := res.Content[0].(*mcp.TextContent).Text; strings.Contains(txt, "image_data") || !strings.Contains(txt, `"inline":true`) {
		t.Fatalf("text block: %.300s", txt)
	}
	_, e := callAs[cameraTakePhotoOut](t, r, reader, "camera_take_photo", nil)
	wantErr(t, e, CodePermissionDenied, nil)
	_, e = callAs[cameraCaptureOut](t, r, operator, "camera_capture", map[string]any{"width": 640, "height": 720})
	wantErr(t, e, CodeInvalidArgument, nil)
	dry, _ := callAs[cameraTakePhotoOut](t, r, operator, "camera_take_photo", map[string]any{"dry_run": true})
	diff(t, "dry run", cameraTakePhotoOut{Width: 1280, Height: 720, Format: "jpeg", DryRun: true}, dry)
}

func TestCameraOffByDefaultAndSizeCap(t *testing.T) {
	r := newRig(t, func(c *config.Config) { c.Camera.Enabled = false })
	_, e := callAs[cameraTakePhotoOut](t, r, admin, "camera_take_photo", nil)
	wantErr(t, e, CodePermissionDenied, map[string]any{"config_key": "[camera] enabled", "domain": "camera"})

	r2 := newRig(t, func(c *config.Config) { c.Camera.MaxImageBytes = 1024 })
	res := r2.call(t, admin, "camera_capture", map[string]any{"width": 1920, "height": 1080, "format": "png"})
	capture, _ := decodeResult[cameraCaptureOut](t, res)
	capture.cameraTakePhotoOut = saved(t, r2, capture.cameraTakePhotoOut)
	if !strings.Contains(capture.Note, "max_image_bytes") || len(res.Content) != 1 {
		t.Fatalf("cap: note %q, %d content blocks", capture.Note, len(res.Content))
	}
	diff(t, "cap", cameraCaptureOut{cameraTakePhotoOut: cameraTakePhotoOut{Width: 1920, Height: 1080, Format: "png"}}, capture,
		cmpopts.IgnoreFields(cameraCaptureOut{}, "Note"), cmpopts.IgnoreUnexported(cameraCaptureOut{}))
}

func TestPhotoPublicURL(t *testing.T) {
	r := newRig(t, func(c *config.Config) { c.Camera.PublicURL = "http://pi.local/media/" })
	photo, _ := callAs[cameraTakePhotoOut](t, r, operator, "camera_take_photo", map[string]any{"resolution": "640x480"})
	if want := "http://pi.local/media/" + filepath.Base(photo.FilePath); photo.PublicURL != want {
		t.Fatalf("public_url: %+v, want %s", photo, want)
	}
	r2 := newRig(t, nil)
	photo, _ = callAs[cameraTakePhotoOut](t, r2, operator, "camera_take_photo", nil)
	if photo.PublicURL != "" {
		t.Fatalf("public_url without configuration: %+v", photo)
	}
	if publicURL("https://x/m", "/media", "/etc/passwd") != "" || publicURL("https://x/m", "/media", "/media/a b.jpg") != "https://x/m/a%20b.jpg" {
		t.Fatal("publicURL outside the root or unescaped")
	}
}
