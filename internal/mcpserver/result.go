package mcpserver

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// structuredResult is the tool's structuredContent: the contract's Result,
// with files described (how each came back and where) rather than repeated
// as base64, since their content is already in the content blocks and the
// whole result must stay under a megabyte.
type structuredResult struct {
	ExitCode    int                   `json:"exit_code"`
	Stdout      string                `json:"stdout"`
	Stderr      string                `json:"stderr"`
	ExecutionMS int64                 `json:"execution_ms"`
	StatePurged bool                  `json:"state_purged"`
	Note        string                `json:"note"`
	Outcome     execapi.Outcome       `json:"outcome"`
	Files       map[string]fileReport `json:"files"`
}

// fileReport says how one returned file came back.
type fileReport struct {
	SizeBytes     int64  `json:"size_bytes"`
	MIMEType      string `json:"mime_type"`
	ReturnedAs    string `json:"returned_as"`
	ReturnedBytes int64  `json:"returned_bytes"`
	ContentIndex  *int   `json:"content_index,omitempty"`
	Note          string `json:"note,omitempty"`
}

// fileSlack is what each file's line in the text block and its report in
// structuredContent may cost, reserved before files get their budgets.
const fileSlack = 1 << 10

// buildResult turns a Result into the tool result: a text block a model can
// read, one content block per returned file, and structuredContent, all
// within Options.MaxResultBytes.
func (t *tool) buildResult(res execapi.Result) *mcp.CallToolResult {
	files := decodeFiles(res.Files)
	outputLimit := t.opts.MaxOutputBytes
	var dropped map[string]bool
	for attempt := 0; ; attempt++ {
		result, size := t.assemble(res, files, outputLimit, dropped)
		if size <= t.opts.MaxResultBytes || attempt >= 6 {
			if size > t.opts.MaxResultBytes {
				t.log.Warn("mcp: result still over the size limit", "bytes", size, "limit", t.opts.MaxResultBytes)
			}
			return result
		}
		// Budgets are estimates; should one be off, give up content in
		// order of least value per byte: files first, then output.
		if dropped == nil {
			dropped = map[string]bool{}
		}
		if p := largestKept(files, dropped); p != "" {
			dropped[p] = true
			continue
		}
		outputLimit /= 4
	}
}

func decodeFiles(encoded map[string]string) []returnedFile {
	paths := make([]string, 0, len(encoded))
	for p := range encoded {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	files := make([]returnedFile, 0, len(paths))
	for _, p := range paths {
		data, err := base64.StdEncoding.DecodeString(encoded[p])
		if err != nil {
			files = append(files, returnedFile{path: p, decodeErr: err})
			continue
		}
		files = append(files, classify(p, data))
	}
	return files
}

func largestKept(files []returnedFile, dropped map[string]bool) string {
	best, size := "", -1
	for _, f := range files {
		if !dropped[f.path] && f.decodeErr == nil && len(f.data) > size {
			best, size = f.path, len(f.data)
		}
	}
	return best
}

// assemble builds one candidate result and reports its JSON size.
func (t *tool) assemble(res execapi.Result, files []returnedFile, outputLimit int, dropped map[string]bool) (*mcp.CallToolResult, int) {
	var notes []string
	stdout, cut := cutMiddle(res.Stdout, outputLimit)
	if cut {
		notes = append(notes, fmt.Sprintf("stdout (%d bytes) was cut in the middle to %d bytes to keep the result small", len(res.Stdout), len(stdout)))
	}
	stderr, cut := cutMiddle(res.Stderr, outputLimit)
	if cut {
		notes = append(notes, fmt.Sprintf("stderr (%d bytes) was cut in the middle to %d bytes to keep the result small", len(res.Stderr), len(stderr)))
	}
	sr := structuredResult{ExitCode: res.ExitCode, Stdout: stdout, Stderr: stderr, ExecutionMS: res.ExecutionMS,
		StatePurged: res.StatePurged, Outcome: res.Outcome, Files: map[string]fileReport{}}

	// What everything but the files' content costs: the outputs twice (text
	// block and structuredContent), the note, and a line per file.
	fixed := 2*(jsonStringLen(stdout)+jsonStringLen(stderr)) + 2*jsonStringLen(res.Note) + 1024 + len(files)*fileSlack
	available := t.opts.MaxResultBytes - fixed

	// Cheapest first, each taking at most an equal share of what is left,
	// so that small files come back whole and large ones share the rest.
	order := make([]int, len(files))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return files[order[a]].cost < files[order[b]].cost })
	fits := make([]fitted, len(files))
	for n, i := range order {
		f := files[i]
		share := available / (len(files) - n)
		if dropped[f.path] {
			share = 0
		}
		fits[i] = fit(f, max(share, 0))
		available -= fits[i].wireCost
	}

	content := []mcp.Content{nil} // the text block goes first
	for i, f := range files {
		rep := fits[i].report
		if fits[i].content != nil {
			idx := len(content)
			rep.ContentIndex = &idx
			content = append(content, fits[i].content)
		}
		if rep.Note != "" {
			notes = append(notes, rep.Note)
		}
		sr.Files[f.path] = rep
	}
	noted := execapi.Result{Note: res.Note}
	for _, n := range notes {
		noted.AddNote(n)
	}
	sr.Note = noted.Note
	content[0] = &mcp.TextContent{Text: summaryText(sr, files)}
	result := &mcp.CallToolResult{Content: content, StructuredContent: sr}
	data, err := json.Marshal(result)
	if err != nil {
		t.log.Error("mcp: encoding a result", "err", err)
		return result, t.opts.MaxResultBytes + 1
	}
	return result, len(data)
}

// summaryText is the result as a model reads it.
func summaryText(sr structuredResult, files []returnedFile) string {
	var b strings.Builder
	fmt.Fprintf(&b, "exit_code: %d\noutcome: %s\nexecution_ms: %d\nstate_purged: %t\n", sr.ExitCode, sr.Outcome, sr.ExecutionMS, sr.StatePurged)
	if sr.Note != "" {
		fmt.Fprintf(&b, "note: %s\n", sr.Note)
	}
	if len(files) > 0 {
		b.WriteString("returned files:\n")
		for _, f := range files {
			rep := sr.Files[f.path]
			fmt.Fprintf(&b, "- %s: %s, %d bytes, ", f.path, rep.MIMEType, rep.SizeBytes)
			switch {
			case rep.ContentIndex == nil:
				b.WriteString("not returned (see note)\n")
			case rep.ReturnedBytes < rep.SizeBytes:
				fmt.Fprintf(&b, "returned as %s (content block %d, %d bytes after fitting; see note)\n", rep.ReturnedAs, *rep.ContentIndex, rep.ReturnedBytes)
			default:
				fmt.Fprintf(&b, "returned as %s (content block %d)\n", rep.ReturnedAs, *rep.ContentIndex)
			}
		}
	}
	writeStream(&b, "stdout", sr.Stdout)
	writeStream(&b, "stderr", sr.Stderr)
	return strings.TrimSuffix(b.String(), "\n")
}

func writeStream(b *strings.Builder, name, s string) {
	if s == "" {
		fmt.Fprintf(b, "--- %s: empty ---\n", name)
		return
	}
	fmt.Fprintf(b, "--- %s ---\n%s", name, s)
	if !strings.HasSuffix(s, "\n") {
		b.WriteString("\n")
	}
}

// cutMiddle keeps the first quarter and the last three quarters of limit
// bytes of s (errors and results tend to be at the end), marking the cut.
func cutMiddle(s string, limit int) (string, bool) {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= limit {
		return s, false
	}
	head := validPrefix(s, limit/4)
	tailStart := len(s) - (limit - len(head))
	for tailStart < len(s) && tailStart > 0 && !isRuneStart(s[tailStart]) {
		tailStart++
	}
	return fmt.Sprintf("%s\n[… %d bytes cut …]\n%s", head, tailStart-len(head), s[tailStart:]), true
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
