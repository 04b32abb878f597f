package client

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// sseEvent is one server-sent event: its id, name and data lines joined.
type sseEvent struct {
	id   int
	name string
	data []byte
}

// readSSE reads text/event-stream from r (the W3C format: fields "id",
// "event", "data", comment lines, events ended by a blank line) and calls
// each for every event until each says stop or r ends; it returns r's
// error (nil at its end). A line longer than maxLine (a result is one
// line) is an error.
func readSSE(r io.Reader, maxLine int, each func(sseEvent) (stop bool)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var ev sseEvent
	var data [][]byte
	pending := false
	for {
		line, err := readLine(br, maxLine)
		if err != nil {
			return err
		}
		if line == nil {
			return nil // the end of the stream
		}
		if len(line) == 0 {
			if pending {
				ev.data = bytes.Join(data, []byte("\n"))
				if each(ev) {
					return nil
				}
			}
			ev, data, pending = sseEvent{}, nil, false
			continue
		}
		if line[0] == ':' {
			continue // a comment: the keep-alive
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "id":
			ev.id, _ = strconv.Atoi(string(value))
		case "event":
			ev.name = string(value)
		case "data":
			data = append(data, value)
		default:
			continue
		}
		pending = true
	}
}

// errLongLine is a stream line over readSSE's bound.
var errLongLine = errors.New("event stream: a line is over the size bound")

// readLine returns the next line without its end (\n or \r\n), nil at the
// end of br; a last line without an end is a cut stream
// (io.ErrUnexpectedEOF).
func readLine(br *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) > max+2 {
			return nil, fmt.Errorf("%w (%d bytes)", errLongLine, max)
		}
		line = append(line, chunk...)
		switch {
		case err == nil:
			line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
			if line == nil {
				line = []byte{}
			}
			return line, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(line) == 0:
			return nil, nil
		case errors.Is(err, io.EOF):
			return nil, io.ErrUnexpectedEOF
		default:
			return nil, err
		}
	}
}
