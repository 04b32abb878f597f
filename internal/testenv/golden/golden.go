package golden

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

// update is -update: rewrite the files instead of comparing. It is this
// package's, so that every test binary that uses JSON has the one flag.
var update = flag.Bool("update", false, "rewrite golden files (package golden) from what the server answers")

// JSON compares got, one JSON document, with the file at path, indented by
// two spaces (which keeps the answer's key order and every byte of its
// values, so a diff of the file is readable and still exact); under -update
// it writes the file instead.
func JSON(t testing.TB, path string, got []byte) {
	t.Helper()
	var out bytes.Buffer
	if err := json.Indent(&out, got, "", "  "); err != nil {
		t.Fatalf("%s: the answer is not JSON: %v: %s", path, err, got)
	}
	out.WriteByte('\n')
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run %s -update writes it)", err, t.Name())
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Errorf("%s changed: the server now answers\n%s\nIf the change is meant, run go test -run %s -update and review the diff.", path, out.Bytes(), t.Name())
	}
}
