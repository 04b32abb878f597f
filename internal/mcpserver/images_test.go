package mcpserver

import (
	"bytes"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"math/rand"
	"strings"
	"testing"
)

func noisy(w, h int) *image.NRGBA {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	r := rand.New(rand.NewSource(7))
	r.Read(img.Pix)
	for i := 3; i < len(img.Pix); i += 4 {
		img.Pix[i] = 255 // opaque
	}
	return img
}

func encodeWith(t *testing.T, img image.Image, enc func(*bytes.Buffer, image.Image) error) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := enc(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestFitImage(t *testing.T) {
	pngData := encodeWith(t, noisy(1000, 800), func(b *bytes.Buffer, i image.Image) error { return png.Encode(b, i) })
	jpegData := encodeWith(t, noisy(1000, 800), func(b *bytes.Buffer, i image.Image) error { return jpeg.Encode(b, i, nil) })
	pal := image.NewPaletted(image.Rect(0, 0, 900, 900), color.Palette{color.Black, color.White, color.RGBA{255, 0, 0, 255}})
	r := rand.New(rand.NewSource(1))
	for i := range pal.Pix {
		pal.Pix[i] = uint8(r.Intn(3))
	}
	gifData := encodeWith(t, pal, func(b *bytes.Buffer, i image.Image) error { return gif.Encode(b, i, nil) })
	wide := encodeWith(t, image.NewGray(image.Rect(0, 0, 9000, 40)), func(b *bytes.Buffer, i image.Image) error { return png.Encode(b, i) })

	const budget = 100 << 10
	cases := []struct {
		name, mime string
		data       []byte
		wantMIME   string
		wantNote   string
	}{
		{"png", "image/png", pngData, "image/", "scaled down from 1000×800"},
		{"jpeg", "image/jpeg", jpegData, "image/jpeg", "scaled down"},
		{"gif", "image/gif", gifData, "image/", "first frame only"},
		{"wider than 2000 px", "image/png", wide, "image/png", "to 2000×"},
	}
	for _, c := range cases {
		out, mimeType, note, err := fitImage(c.data, c.mime, budget)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if base64Len(len(out)) > budget || !strings.HasPrefix(mimeType, c.wantMIME) || !strings.Contains(note, c.wantNote) {
			t.Errorf("%s: %d bytes as %s, note %q", c.name, len(out), mimeType, note)
		}
		if _, format, err := image.Decode(bytes.NewReader(out)); err != nil || "image/"+format != mimeType {
			t.Errorf("%s: output does not decode as %s: %v", c.name, mimeType, err)
		}
	}

	// Small images pass untouched.
	small := encodeWith(t, noisy(20, 20), func(b *bytes.Buffer, i image.Image) error { return png.Encode(b, i) })
	if out, _, note, err := fitImage(small, "image/png", budget); err != nil || !bytes.Equal(out, small) || note != "" {
		t.Errorf("small PNG changed: %v %q", err, note)
	}
	// An SVG cannot be scaled; a too-large one is refused with advice.
	svg := []byte("<svg xmlns='http://www.w3.org/2000/svg'>" + strings.Repeat("<rect width='1' height='1'/>", 10000) + "</svg>")
	if _, _, _, err := fitImage(svg, "image/svg+xml", budget); err == nil || !strings.Contains(err.Error(), "PNG") {
		t.Errorf("large SVG: %v", err)
	}
	// A decompression bomb is not decoded.
	bomb := encodeWith(t, image.NewGray(image.Rect(0, 0, 7000, 7000)), func(b *bytes.Buffer, i image.Image) error { return png.Encode(b, i) })
	if _, _, _, err := fitImage(bomb, "image/png", 1000); err == nil || !strings.Contains(err.Error(), "7000×7000") {
		t.Errorf("7000×7000 PNG in a tiny budget: %v", err)
	}
}

func TestClassify(t *testing.T) {
	cases := []struct {
		path string
		data []byte
		kind string
		mime string
	}{
		{"/tmp/a.png", pngMagic, asImage, "image/png"},
		{"/tmp/a.dat", []byte("\xff\xd8\xff\xe0 jpeg"), asImage, "image/jpeg"},
		{"/tmp/a.svg", []byte("<svg></svg>"), asImage, "image/svg+xml"},
		{"/tmp/noext", []byte("<?xml version='1.0'?><svg xmlns='x'/>"), asImage, "image/svg+xml"},
		{"/tmp/a.csv", []byte("a,b\n"), asText, "text/csv"},
		{"/tmp/a.json", []byte("{}"), asText, "application/json"},
		{"/tmp/empty", nil, asText, "text/plain"},
		{"/tmp/nul.txt", []byte("a\x00b"), asResource, "text/plain"},
		{"/tmp/a.bin", []byte{0xff, 0xfe, 0}, asResource, "application/octet-stream"},
		{"/tmp/a.gz", []byte{0x1f, 0x8b, 8, 0}, asResource, "application/gzip"},
	}
	for _, c := range cases {
		f := classify(c.path, c.data)
		if f.kind != c.kind || f.mime != c.mime {
			t.Errorf("%s: %s %s, want %s %s", c.path, f.kind, f.mime, c.kind, c.mime)
		}
	}
}

func TestCutMiddleKeepsBothEndsAndValidUTF8(t *testing.T) {
	s := strings.Repeat("é", 1000) + "END"
	out, cut := cutMiddle(s, 400)
	if !cut || !strings.HasPrefix(out, "é") || !strings.HasSuffix(out, "END") || !strings.Contains(out, "bytes cut") || len(out) > 450 {
		t.Errorf("cut %v: %q", cut, out)
	}
	if strings.Contains(out, "\uFFFD") {
		t.Errorf("cut split a character: %q", out)
	}
	if out, cut := cutMiddle("short", 400); cut || out != "short" {
		t.Errorf("short string changed: %q", out)
	}
}
