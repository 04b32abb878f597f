package mcpserver

import (
	"bytes"
	"encoding/json"
	"image"
	_ "image/jpeg"
	"image/png"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

var pngMagic = []byte("\x89PNG\r\n\x1a\n")

func TestSuccessTextAndStructuredContent(t *testing.T) {
	cs := connect(t, testEngine(t), Options{}, nil)
	res := call(t, cs, map[string]any{
		"runtime": "python3.13",
		"code":    "import os, sys\nprint('hello', os.environ['GREETING'])\nprint(open('/tmp/in.txt').read())\nprint('warned', file=sys.stderr)\nsys.exit(3)",
		"env":     map[string]string{"GREETING": "world"},
		"files":   map[string]string{"/tmp/in.txt": "from a file"},
	})
	if res.IsError {
		t.Fatalf("tool error: %v", textOf(t, res.Content[0]))
	}
	text := textOf(t, res.Content[0])
	for _, want := range []string{"exit_code: 3", "execution_ms: ", "state_purged: true", "--- stdout ---\nhello world\nfrom a file\n", "--- stderr ---\nwarned"} {
		if !strings.Contains(text, want) {
			t.Errorf("text block lacks %q:\n%s", want, text)
		}
	}
	sr := structured(t, res)
	if sr.ExitCode != 3 || sr.Stdout != "hello world\nfrom a file\n" || sr.Stderr != "warned\n" || !sr.StatePurged || sr.ExecutionMS <= 0 {
		t.Errorf("structuredContent %+v", sr)
	}
	// Every field of the contract's result is on the wire, also when empty.
	data, _ := json.Marshal(res.StructuredContent)
	var raw map[string]any
	json.Unmarshal(data, &raw)
	for _, k := range []string{"exit_code", "stdout", "stderr", "execution_ms", "state_purged", "note", "files"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("structuredContent lacks %q: %s", k, data)
		}
	}
}

// The engine's note (a timeout, here) reaches the model, and exit code 124.
func TestTimeoutNote(t *testing.T) {
	cs := connect(t, testEngine(t), Options{}, nil)
	res := call(t, cs, map[string]any{"runtime": "bash", "code": "echo start; sleep 10", "timeout_ms": 1000})
	sr := structured(t, res)
	text := textOf(t, res.Content[0])
	if sr.ExitCode != 124 || !strings.Contains(sr.Note, "timeout") || !strings.Contains(text, "exit_code: 124") || !strings.Contains(text, "note: ") {
		t.Errorf("exit %d note %q text:\n%s", sr.ExitCode, sr.Note, text)
	}
}

// A matplotlib chart comes back as an image block holding a real PNG.
func TestChartComesBackAsImage(t *testing.T) {
	cs := connect(t, testEngine(t), Options{}, nil)
	res := call(t, cs, map[string]any{
		"runtime":      "python3.13",
		"code":         "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.title('squares')\nplt.savefig('/tmp/chart.png')\nprint('saved')",
		"return_files": []string{"/tmp/chart.png"},
	})
	if res.IsError || len(res.Content) != 2 {
		t.Fatalf("isError %v, %d content blocks: %v", res.IsError, len(res.Content), res.Content)
	}
	img, ok := res.Content[1].(*mcp.ImageContent)
	if !ok {
		t.Fatalf("second block is %T, want an image", res.Content[1])
	}
	if img.MIMEType != "image/png" || !bytes.HasPrefix(img.Data, pngMagic) {
		t.Fatalf("image %s, starts %q", img.MIMEType, img.Data[:min(8, len(img.Data))])
	}
	decoded, err := png.Decode(bytes.NewReader(img.Data))
	if err != nil || decoded.Bounds().Dx() < 100 {
		t.Fatalf("PNG does not decode: %v", err)
	}
	sr := structured(t, res)
	rep := sr.Files["/tmp/chart.png"]
	if rep.ReturnedAs != "image" || rep.MIMEType != "image/png" || rep.ContentIndex == nil || *rep.ContentIndex != 1 ||
		rep.SizeBytes != int64(len(img.Data)) || rep.Note != "" {
		t.Errorf("file report %+v", rep)
	}
	if text := textOf(t, res.Content[0]); !strings.Contains(text, "/tmp/chart.png: image/png") || !strings.Contains(text, "content block 1") {
		t.Errorf("text block does not list the image:\n%s", text)
	}
}

// UTF-8 files come back as text, other binary files as an embedded resource
// with a MIME type, a missing one as a note.
func TestTextAndBinaryFiles(t *testing.T) {
	cs := connect(t, testEngine(t), Options{}, nil)
	res := call(t, cs, map[string]any{
		"runtime": "python3.13",
		"code": "open('/tmp/data.csv','w').write('a,b\\n1,2\\nü,3\\n')\n" +
			"open('/tmp/blob.bin','wb').write(bytes(range(256)))\n" +
			"open('/tmp/doc.pdf','wb').write(b'%PDF-1.4\\n\\x00\\xff\\xfe binary')\n",
		"return_files": []string{"/tmp/data.csv", "/tmp/blob.bin", "/tmp/doc.pdf", "/tmp/missing.txt"},
	})
	if res.IsError {
		t.Fatalf("tool error: %v", textOf(t, res.Content[0]))
	}
	sr := structured(t, res)
	byIndex := func(path string) mcp.Content {
		rep := sr.Files[path]
		if rep.ContentIndex == nil {
			t.Fatalf("%s has no content block: %+v", path, rep)
		}
		return res.Content[*rep.ContentIndex]
	}
	csv := textOf(t, byIndex("/tmp/data.csv"))
	if !strings.HasSuffix(csv, "a,b\n1,2\nü,3\n") || !strings.Contains(csv, "/tmp/data.csv (text/csv") {
		t.Errorf("csv block %q", csv)
	}
	blob, ok := byIndex("/tmp/blob.bin").(*mcp.EmbeddedResource)
	if !ok || blob.Resource.MIMEType != "application/octet-stream" || len(blob.Resource.Blob) != 256 || blob.Resource.Blob[255] != 255 ||
		blob.Resource.URI != "scratchrun://sandbox/tmp/blob.bin" {
		t.Errorf("blob block %#v", byIndex("/tmp/blob.bin"))
	}
	pdf, ok := byIndex("/tmp/doc.pdf").(*mcp.EmbeddedResource)
	if !ok || pdf.Resource.MIMEType != "application/pdf" {
		t.Errorf("pdf block %#v", byIndex("/tmp/doc.pdf"))
	}
	if sr.Files["/tmp/data.csv"].ReturnedAs != "text" || sr.Files["/tmp/blob.bin"].ReturnedAs != "resource" {
		t.Errorf("reports %+v", sr.Files)
	}
	if !strings.Contains(sr.Note, "/tmp/missing.txt") {
		t.Errorf("note %q does not mention the missing file", sr.Note)
	}
}

// Results stay under the size limit: a large noisy PNG is scaled down (and
// still decodes), a large text file and long output are cut, and the text
// says so.
func TestOversizeResultIsFitted(t *testing.T) {
	cs := connect(t, testEngine(t), Options{}, nil)
	res := call(t, cs, map[string]any{
		"runtime": "python3.13",
		"code": "import numpy as np\nfrom PIL import Image\n" +
			"Image.fromarray(np.random.default_rng(1).integers(0, 256, (1200, 1600, 3), dtype=np.uint8)).save('/tmp/noise.png')\n" +
			"open('/tmp/big.txt','w').write('line of text\\n' * 200000)\n" +
			"print('x' * 500000)\nprint('THE END')",
		"return_files": []string{"/tmp/noise.png", "/tmp/big.txt"},
		"timeout_ms":   30000,
	})
	if res.IsError {
		t.Fatalf("tool error: %v", textOf(t, res.Content[0]))
	}
	wire, _ := json.Marshal(res)
	if len(wire) > DefaultMaxResultBytes {
		t.Errorf("result is %d bytes, over %d", len(wire), DefaultMaxResultBytes)
	}
	sr := structured(t, res)
	noise := sr.Files["/tmp/noise.png"]
	if noise.ReturnedAs != "image" || noise.ReturnedBytes >= noise.SizeBytes || noise.SizeBytes < 4<<20 || !strings.Contains(noise.Note, "scaled down") {
		t.Errorf("noise.png report %+v", noise)
	}
	img := res.Content[*noise.ContentIndex].(*mcp.ImageContent)
	cfg, format, err := image.DecodeConfig(bytes.NewReader(img.Data))
	if err != nil || cfg.Width >= 1600 || cfg.Width < 100 || "image/"+format != img.MIMEType {
		t.Errorf("scaled image: %v, %s %dx%d as %s", err, format, cfg.Width, cfg.Height, img.MIMEType)
	}
	big := sr.Files["/tmp/big.txt"]
	if big.ReturnedAs != "text" || big.ReturnedBytes >= big.SizeBytes || !strings.Contains(big.Note, "cut") {
		t.Fatalf("big.txt report %+v (note %q)", big, sr.Note)
	}
	if block := textOf(t, res.Content[*big.ContentIndex]); !strings.Contains(block, "first ") || !strings.HasPrefix(strings.SplitN(block, "\n", 2)[1], "line of text\n") {
		t.Errorf("big.txt block starts %q", block[:min(200, len(block))])
	}
	text := textOf(t, res.Content[0])
	if !strings.Contains(text, "stdout (500009 bytes) was cut") || !strings.Contains(text, "THE END") || !strings.Contains(text, "bytes cut …]") {
		t.Errorf("text block does not keep the end of stdout and say it was cut:\n%s", text[:min(2000, len(text))])
	}
	if !strings.Contains(text, "scaled down") || !strings.Contains(text, "big.txt was cut") {
		t.Errorf("text block does not say what was changed:\n%s", text[:min(2000, len(text))])
	}
	t.Logf("result %d bytes on the wire; noise.png %d -> %d bytes (%dx%d %s); big.txt %d -> %d bytes",
		len(wire), noise.SizeBytes, noise.ReturnedBytes, cfg.Width, cfg.Height, img.MIMEType, big.SizeBytes, big.ReturnedBytes)
}
