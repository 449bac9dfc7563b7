package agent

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/agent/tool"
	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/hw/camera"
	"github.com/raspi-mcp/raspi-mcp/internal/identity"
	"github.com/raspi-mcp/raspi-mcp/privhelper/client"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

// cameraTakePhotoIn is camera.take_photo: a resolution and format from fixed lists,
// never a path, so the server alone decides where the file goes (tool
// catalog, spec 002 §7.1).
type cameraTakePhotoIn struct {
	Resolution string `json:"resolution,omitempty"`
	Format     string `json:"format,omitempty"`
	tool.GuardArgs
}

// cameraTakePhotoOut is camera.take_photo's result: the file the server wrote and, when
// configured, its public URL (tool catalog, spec 002 §7.1), with additive fields.
type cameraTakePhotoOut struct {
	FilePath  string `json:"file_path" jsonschema:"made by the server, under the configured media root"`
	Width     int    `json:"width"`
	Height    int    `json:"height"`
	Format    string `json:"format"`
	SizeBytes int64  `json:"size_bytes"`
	Timestamp string `json:"timestamp,omitempty"`
	PublicURL string `json:"public_url,omitempty" jsonschema:"where the photo can be fetched, when [camera] public_url is configured"`
	DryRun    bool   `json:"dry_run,omitempty"`
}

// cameraCaptureIn is camera.capture: width, height, format and JPEG quality, as the
// tool catalog's example request asks for a photo (spec 002 §2.6.5).
type cameraCaptureIn struct {
	Width   int    `json:"width"`
	Height  int    `json:"height"`
	Format  string `json:"format,omitempty"`
	Quality int    `json:"quality,omitempty"`
	tool.GuardArgs
}

// cameraCaptureOut describes the photo and carries it twice: base64 in image_data,
// as the tool catalog's example answer returns it to programs (spec 002
// §2.6.5), and as an MCP image block, where
// clients show pictures to the model.
type cameraCaptureOut struct {
	cameraTakePhotoOut
	ImageData string `json:"image_data,omitempty" jsonschema:"the image, base64; absent when over [camera] max_image_bytes (see note)"`
	Inline    bool   `json:"inline" jsonschema:"the image is in image_data and attached as an image content block"`
	Note      string `json:"note,omitempty"`
	image     []byte
	mime      string
}

// TextView is the result as the text block shows it: without image_data,
// which the image block already gives the model.
func (o cameraCaptureOut) TextView() any {
	o.ImageData = ""
	return o
}

// Content attaches the image where clients show pictures.
func (o cameraCaptureOut) Content() []mcp.Content {
	if len(o.image) == 0 {
		return nil
	}
	return []mcp.Content{&mcp.ImageContent{Data: o.image, MIMEType: o.mime}}
}

// cameraTools are the camera namespace's tools: the [camera] settings they
// read and the helper that takes the photos.
type cameraTools struct {
	conf   func() *config.Config
	helper *client.Client
}

func (a *Agent) registerCamera() {
	(&cameraTools{conf: a.conf, helper: a.helper}).register(a.tools)
}

func (cam *cameraTools) register(r *tool.Registry) {
	tool.Add(r, tool.Spec[cameraTakePhotoIn, cameraTakePhotoOut]{
		ID: "camera.take_photo", Title: "Take a photo",
		Description: "Take a photo; it is saved under the media root.",
		Rule:        tool.Rule{MinRole: identity.RoleOperate, Risk: tool.RiskLow},
		Props:       []tool.Prop{tool.P("resolution", tool.Enum("640x480", "1280x720", "1920x1080"), tool.Default("1280x720")), tool.P("format", tool.Enum("jpeg", "png"), tool.Default("jpeg"))},
		Run: func(ctx context.Context, c *tool.Call, in cameraTakePhotoIn) (cameraTakePhotoOut, error) {
			var w, h int
			fmt.Sscanf(in.Resolution, "%dx%d", &w, &h)
			return cam.photo(ctx, c, proto.CameraCaptureReq{Width: w, Height: h, Format: in.Format, Quality: camera.DefaultQuality})
		},
		Summary: func(_ cameraTakePhotoIn, o cameraTakePhotoOut) string { return photoLine(o) },
	})
	tool.Add(r, tool.Spec[cameraCaptureIn, cameraCaptureOut]{
		ID: "camera.capture", Title: "Capture an image",
		Description: "Take a photo and return it as an image (size-capped); also saved.",
		Rule:        tool.Rule{MinRole: identity.RoleOperate, Risk: tool.RiskLow},
		Props: []tool.Prop{tool.P("width", tool.Enum(640, 1280, 1920)), tool.P("height", tool.Enum(480, 720, 1080)),
			tool.P("format", tool.Enum("jpeg", "png"), tool.Default("jpeg")), tool.P("quality", tool.Min(1), tool.Max(100), tool.Default(85))},
		Slow:    true,
		Example: &cameraCaptureIn{Width: 640, Height: 480},
		Run:     cam.capture,
		Summary: func(_ cameraCaptureIn, o cameraCaptureOut) string { return photoLine(o.cameraTakePhotoOut) },
	})
}

func (cam *cameraTools) photo(ctx context.Context, c *tool.Call, req proto.CameraCaptureReq) (cameraTakePhotoOut, error) {
	if err := req.Validate(); err != nil {
		var pe *proto.Error
		if errors.As(err, &pe) {
			return cameraTakePhotoOut{}, tool.Errf(CodeInvalidArgument, "%s", strings.TrimPrefix(pe.Message, "proto: ")).WithDetails(pe.Details)
		}
		return cameraTakePhotoOut{}, err
	}
	if c.DryRun {
		return cameraTakePhotoOut{Width: req.Width, Height: req.Height, Format: req.Format, DryRun: true}, nil
	}
	p, err := client.Call(ctx, cam.helper, proto.CameraCapture, req)
	if err != nil {
		return cameraTakePhotoOut{}, err
	}
	return cameraTakePhotoOut{FilePath: p.Path, Width: p.Width, Height: p.Height, Format: p.Format, SizeBytes: p.SizeBytes, Timestamp: p.Taken.UTC().Format(time.RFC3339),
		PublicURL: publicURL(cam.conf().Camera.PublicURL, cam.conf().Camera.MediaRoot, p.Path)}, nil
}

// publicURL is the photo's address under the configured base, or "" when
// none is configured or the file is not under the media root.
func publicURL(base, root, path string) string {
	if base == "" {
		return ""
	}
	rel, err := filepath.Rel(root, path)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return ""
	}
	parts := strings.Split(filepath.ToSlash(rel), "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return strings.TrimRight(base, "/") + "/" + strings.Join(parts, "/")
}

func (cam *cameraTools) capture(ctx context.Context, c *tool.Call, in cameraCaptureIn) (cameraCaptureOut, error) {
	p, err := cam.photo(ctx, c, proto.CameraCaptureReq{Width: in.Width, Height: in.Height, Format: in.Format, Quality: in.Quality})
	if err != nil || p.DryRun {
		return cameraCaptureOut{cameraTakePhotoOut: p}, err
	}
	out := cameraCaptureOut{cameraTakePhotoOut: p, mime: "image/" + p.Format}
	data, err := camera.ReadCapped(camera.Photo{Path: p.FilePath, SizeBytes: p.SizeBytes}, int64(cam.conf().Camera.MaxImageBytes))
	switch {
	case errors.Is(err, camera.ErrTooLarge):
		out.Note = fmt.Sprintf("%d bytes is over [camera] max_image_bytes (%d): saved on the device only; try a smaller size or jpeg", p.SizeBytes, cam.conf().Camera.MaxImageBytes)
	case err != nil:
		return cameraCaptureOut{}, err
	default:
		out.Inline, out.image, out.ImageData = true, data, base64.StdEncoding.EncodeToString(data)
	}
	return out, nil
}

func photoLine(o cameraTakePhotoOut) string {
	if o.DryRun {
		return fmt.Sprintf("would take a %dx%d %s photo", o.Width, o.Height, o.Format)
	}
	return fmt.Sprintf("photo %dx%d %s, %s, saved as %s", o.Width, o.Height, o.Format, bytesH(uint64(o.SizeBytes)), o.FilePath)
}
