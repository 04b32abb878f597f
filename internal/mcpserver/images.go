package mcpserver

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math"

	// Decoders for the raster formats a sandbox may return.
	_ "image/gif"

	"golang.org/x/image/draw"
	_ "golang.org/x/image/webp"
)

const (
	// maxImageSide is the longest side an image may keep. Anthropic's API
	// rejects images over 2000 pixels in requests with many images (and
	// over 8000 in any) and scales anything over 1568 down anyway, so a
	// larger image only costs bytes.
	maxImageSide = 2000
	// maxDecodePixels bounds what is decoded to be scaled down, so that a
	// small, highly compressed file cannot make this process allocate
	// gigabytes (36 megapixels is about 144 MB as RGBA).
	maxDecodePixels = 36_000_000
	// minImageSide is where scaling gives up: an image whose longest side
	// is shorter is useless.
	minImageSide = 64
	jpegQuality  = 85
)

// fitImage returns the image whose base64 fits wireBudget: data itself when
// it fits and is not too large in pixels, otherwise scaled down and
// re-encoded (PNG stays PNG while that is small enough, opaque images may
// become JPEG). note says what was done, empty when nothing was.
func fitImage(data []byte, mimeType string, wireBudget int) (out []byte, outMIME, note string, err error) {
	maxBytes := wireBudget / 4 * 3
	if mimeType == "image/svg+xml" {
		if len(data) <= maxBytes {
			return data, mimeType, "", nil
		}
		return nil, "", "", errors.New("an SVG this large cannot be scaled down to fit the result; save a PNG instead")
	}
	cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return nil, "", "", fmt.Errorf("it is not a readable %s (%v)", mimeType, err)
	}
	if len(data) <= maxBytes && max(cfg.Width, cfg.Height) <= maxImageSide {
		return data, mimeType, "", nil
	}
	if cfg.Width*cfg.Height > maxDecodePixels {
		return nil, "", "", fmt.Errorf("it has %d×%d pixels, too many to scale down here; save a smaller image", cfg.Width, cfg.Height)
	}
	src, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, "", "", fmt.Errorf("it is not a readable %s (%v)", mimeType, err)
	}
	w, h := src.Bounds().Dx(), src.Bounds().Dy()

	// Start from the size the byte budget suggests (bytes grow roughly with
	// area) and the side limit, then correct by what encoding produced.
	scale := math.Min(1, float64(maxImageSide)/float64(max(w, h)))
	if len(data) > maxBytes {
		scale = math.Min(scale, math.Sqrt(float64(maxBytes)/float64(len(data))))
	}
	asJPEG := mimeType == "image/jpeg"
	for attempt := 0; attempt < 8; attempt++ {
		nw, nh := int(float64(w)*scale), int(float64(h)*scale)
		if nw < 1 || nh < 1 || max(nw, nh) < minImageSide {
			break
		}
		out, err := encodeScaled(src, nw, nh, asJPEG)
		if err != nil {
			return nil, "", "", fmt.Errorf("re-encoding failed: %v", err)
		}
		outMIME := "image/png"
		if asJPEG {
			outMIME = "image/jpeg"
		}
		if len(out) <= maxBytes {
			note := fmt.Sprintf("scaled down from %d×%d to %d×%d pixels (%s, %d bytes instead of %d)", w, h, nw, nh, outMIME, len(out), len(data))
			if mimeType == "image/gif" {
				note += ", first frame only"
			}
			return out, outMIME, note, nil
		}
		// A photo-like PNG shrinks far better as JPEG; charts rarely get here.
		if !asJPEG && attempt >= 1 && opaque(src) {
			asJPEG = true
			continue
		}
		scale *= math.Sqrt(float64(maxBytes)/float64(len(out))) * 0.9
	}
	return nil, "", "", fmt.Errorf("it could not be scaled down to fit in %d bytes", maxBytes)
}

// encodeScaled draws src at w×h and encodes it. JPEG has no alpha, so
// transparent parts become white, as a viewer would show them.
func encodeScaled(src image.Image, w, h int, asJPEG bool) ([]byte, error) {
	var buf bytes.Buffer
	if asJPEG {
		dst := image.NewRGBA(image.Rect(0, 0, w, h))
		draw.Draw(dst, dst.Bounds(), image.NewUniform(color.White), image.Point{}, draw.Src)
		draw.BiLinear.Scale(dst, dst.Bounds(), src, src.Bounds(), draw.Over, nil)
		err := jpeg.Encode(&buf, dst, &jpeg.Options{Quality: jpegQuality})
		return buf.Bytes(), err
	}
	dst := image.NewNRGBA(image.Rect(0, 0, w, h))
	draw.BiLinear.Scale(dst, dst.Bounds(), src, src.Bounds(), draw.Src, nil)
	err := png.Encode(&buf, dst)
	return buf.Bytes(), err
}

func opaque(img image.Image) bool {
	if o, ok := img.(interface{ Opaque() bool }); ok {
		return o.Opaque()
	}
	return false
}
