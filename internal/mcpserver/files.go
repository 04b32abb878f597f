package mcpserver

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// How a returned file comes back.
const (
	asImage    = "image"
	asText     = "text"
	asResource = "resource"
	asOmitted  = "omitted"
)

// returnedFile is one file of a Result, decoded and classified.
type returnedFile struct {
	path string
	data []byte
	kind string // asImage, asText or asResource
	mime string
	// decodeErr is set when the Service sent content that is not base64.
	decodeErr error
	// cost is what the file costs in the result as it is (see wireCost).
	cost int
}

// minFileBudget is the least wire size worth spending on a file's content:
// below it, a file is reported as omitted rather than as a useless stub.
const minFileBudget = 2 << 10

// blobOverhead is the JSON around a base64 blob (type, mimeType, uri, _meta).
const blobOverhead = 200

// resourceURI names a returned binary file. The sandbox it came from no
// longer exists, so the URI is a name, not something to read again.
func resourceURI(p string) string { return "scratchrun://sandbox" + p }

// classify decides how a file is returned: raster images by their magic
// bytes, SVG by name or content, valid UTF-8 as text, the rest as binary.
func classify(p string, data []byte) returnedFile {
	f := classifyKind(p, data)
	f.cost = f.wireCost()
	return f
}

func classifyKind(p string, data []byte) returnedFile {
	f := returnedFile{path: p, data: data}
	sniffed := http.DetectContentType(data)
	switch sniffed {
	case "image/png", "image/jpeg", "image/gif", "image/webp":
		f.kind, f.mime = asImage, sniffed
		return f
	}
	isText := utf8.Valid(data) && !bytes.ContainsRune(data, 0)
	ext := strings.ToLower(path.Ext(p))
	if isText && (ext == ".svg" || looksLikeSVG(data)) {
		f.kind, f.mime = asImage, "image/svg+xml"
		return f
	}
	if isText {
		f.kind, f.mime = asText, textMIME(ext)
		return f
	}
	f.kind, f.mime = asResource, binaryMIME(ext, sniffed)
	return f
}

func looksLikeSVG(data []byte) bool {
	head := data
	if len(head) > 1024 {
		head = head[:1024]
	}
	return bytes.Contains(head, []byte("<svg"))
}

// Well-known types, so that results do not depend on the host's
// /etc/mime.types.
var knownTypes = map[string]string{
	".txt": "text/plain", ".log": "text/plain", ".csv": "text/csv", ".tsv": "text/tab-separated-values",
	".json": "application/json", ".jsonl": "application/jsonl", ".md": "text/markdown", ".html": "text/html",
	".htm": "text/html", ".xml": "application/xml", ".yaml": "application/yaml", ".yml": "application/yaml",
	".py": "text/x-python", ".js": "text/javascript", ".sh": "text/x-shellscript", ".css": "text/css",
	".pdf": "application/pdf", ".zip": "application/zip", ".gz": "application/gzip", ".tar": "application/x-tar",
	".parquet": "application/vnd.apache.parquet", ".npy": "application/octet-stream",
	".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
	".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
	".wav":  "audio/wav", ".mp3": "audio/mpeg", ".bmp": "image/bmp", ".tif": "image/tiff", ".tiff": "image/tiff",
}

func textMIME(ext string) string {
	if t, ok := knownTypes[ext]; ok {
		return t
	}
	if t := mime.TypeByExtension(ext); strings.HasPrefix(t, "text/") {
		t, _, _ = strings.Cut(t, ";")
		return t
	}
	return "text/plain"
}

func binaryMIME(ext, sniffed string) string {
	if t, ok := knownTypes[ext]; ok {
		return t
	}
	t, _, _ := strings.Cut(sniffed, ";")
	if t != "text/plain" {
		return t
	}
	return "application/octet-stream"
}

// base64Len is the length of data's standard base64 encoding.
func base64Len(n int) int { return base64.StdEncoding.EncodedLen(n) }

// jsonStringLen is the length of s encoded as a JSON string.
func jsonStringLen(s string) int {
	b, _ := json.Marshal(s)
	return len(b)
}

// fileHeader introduces a text file's content in its text block.
func fileHeader(f returnedFile, shown int) string {
	if shown < len(f.data) {
		return fmt.Sprintf("File %s (%s, first %d of %d bytes; the rest was cut to keep the result small):\n", f.path, f.mime, shown, len(f.data))
	}
	return fmt.Sprintf("File %s (%s, %d bytes):\n", f.path, f.mime, len(f.data))
}

// wireCost is what the file costs in the result as it is.
func (f returnedFile) wireCost() int {
	switch f.kind {
	case asText:
		return jsonStringLen(fileHeader(f, len(f.data))+string(f.data)) + blobOverhead
	default:
		return base64Len(len(f.data)) + blobOverhead
	}
}

// fitted is a file's content as it goes into the result.
type fitted struct {
	content  mcp.Content
	report   fileReport
	wireCost int
}

// fit makes the file's content cost at most budget bytes on the wire:
// whole when it fits, otherwise scaled down (raster images), cut (text and
// binary files) or omitted, with a note saying which.
func fit(f returnedFile, budget int) fitted {
	rep := fileReport{SizeBytes: int64(len(f.data)), MIMEType: f.mime, ReturnedAs: f.kind}
	if f.decodeErr != nil {
		rep.ReturnedAs, rep.MIMEType = asOmitted, "application/octet-stream"
		rep.Note = fmt.Sprintf("%s could not be decoded (%v)", f.path, f.decodeErr)
		return fitted{report: rep}
	}
	omit := func(why string) fitted {
		rep.ReturnedAs = asOmitted
		rep.Note = why
		return fitted{report: rep}
	}
	if budget < minFileBudget && f.cost > budget {
		return omit(fmt.Sprintf("%s (%d bytes) was not returned: there was no room left in the result", f.path, len(f.data)))
	}
	switch f.kind {
	case asImage:
		data, mimeType, note, err := fitImage(f.data, f.mime, budget-blobOverhead)
		if err != nil {
			return omit(fmt.Sprintf("%s (%s, %d bytes) was not returned: %v", f.path, f.mime, len(f.data), err))
		}
		rep.MIMEType, rep.ReturnedBytes = mimeType, int64(len(data))
		if note != "" {
			rep.Note = fmt.Sprintf("%s was %s to fit what MCP clients accept", f.path, note)
		}
		return fitted{content: &mcp.ImageContent{Data: data, MIMEType: mimeType}, report: rep, wireCost: base64Len(len(data)) + blobOverhead}
	case asText:
		text := cutText(f, budget-blobOverhead)
		rep.ReturnedBytes = int64(len(text))
		if len(text) < len(f.data) {
			rep.Note = fmt.Sprintf("%s was cut to its first %d of %d bytes to keep the result small", f.path, len(text), len(f.data))
		}
		block := fileHeader(f, len(text)) + text
		return fitted{content: &mcp.TextContent{Text: block}, report: rep, wireCost: jsonStringLen(block) + blobOverhead}
	default:
		data := f.data
		if limit := (budget - blobOverhead) / 4 * 3; len(data) > limit {
			data = data[:limit]
			rep.Note = fmt.Sprintf("%s was cut to its first %d of %d bytes to keep the result small", f.path, len(data), len(f.data))
		}
		rep.ReturnedBytes = int64(len(data))
		res := &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: resourceURI(f.path), MIMEType: f.mime, Blob: data}}
		return fitted{content: res, report: rep, wireCost: base64Len(len(data)) + blobOverhead}
	}
}

// cutText returns the longest prefix of f's text (at a character boundary)
// whose block fits budget once JSON-encoded.
func cutText(f returnedFile, budget int) string {
	text := string(f.data)
	for i := 0; i < 8; i++ {
		cost := jsonStringLen(fileHeader(f, len(text)) + text)
		if cost <= budget {
			return text
		}
		// JSON escaping inflates unevenly: shrink by the measured ratio.
		keep := int(float64(len(text)) * float64(budget) / float64(cost) * 0.95)
		if keep <= 0 {
			return ""
		}
		text = validPrefix(text, keep)
	}
	return validPrefix(text, len(text)/2)
}

// validPrefix cuts s to at most n bytes without splitting a character.
func validPrefix(s string, n int) string {
	if n >= len(s) {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
