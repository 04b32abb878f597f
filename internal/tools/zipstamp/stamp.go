package main

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"time"
)

// stampFile rewrites the zip archive at path in place with every entry
// at t.
func stampFile(path string, t time.Time) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out, err := stamp(data, t)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return os.WriteFile(path, out, 0o644)
}

// stamp copies the archive data with every entry's time t: the MS-DOS
// date and time fields (whole seconds, rounded down to even ones as the
// format has them), and no extended-timestamp extra field, which would
// carry another time. The compressed bytes are copied as they are, so
// the entries are what the packer wrote, less their times.
func stamp(data []byte, t time.Time) ([]byte, error) {
	r, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	w := zip.NewWriter(&b)
	date, clock := msDosTime(t)
	for _, f := range r.File {
		fh := f.FileHeader
		fh.Modified = time.Time{}
		fh.ModifiedDate, fh.ModifiedTime = date, clock
		fh.Extra = withoutTimestamps(fh.Extra)
		raw, err := f.OpenRaw()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.Name, err)
		}
		dst, err := w.CreateRaw(&fh)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.Name, err)
		}
		if _, err := io.Copy(dst, raw); err != nil {
			return nil, fmt.Errorf("%s: %w", f.Name, err)
		}
	}
	if err := w.SetComment(r.Comment); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Extra-field IDs that hold times (APPNOTE 4.5 and Info-ZIP's): NTFS's,
// the extended timestamp, and Info-ZIP's old Unix one.
var timeFields = map[uint16]bool{0x000a: true, 0x5455: true, 0x5855: true}

// withoutTimestamps is extra less its fields that carry times. A field
// cut short (not well formed) is kept as it is, from there on.
func withoutTimestamps(extra []byte) []byte {
	var out []byte
	for len(extra) >= 4 {
		id := binary.LittleEndian.Uint16(extra)
		size := int(binary.LittleEndian.Uint16(extra[2:]))
		if 4+size > len(extra) {
			break
		}
		if !timeFields[id] {
			out = append(out, extra[:4+size]...)
		}
		extra = extra[4+size:]
	}
	return append(out, extra...)
}

// msDosTime is t as the MS-DOS date and time of a zip header: the year
// from 1980 (earlier times are 1980-01-01), seconds halved.
func msDosTime(t time.Time) (date, clock uint16) {
	if t.Year() < 1980 {
		t = time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	date = uint16(t.Day() + int(t.Month())<<5 + (t.Year()-1980)<<9)
	clock = uint16(t.Second()/2 + t.Minute()<<5 + t.Hour()<<11)
	return date, clock
}
