package main

import (
	"log/slog"
	"os"
)

// newLogger logs to stderr (stdout may be a protocol stream: mcp's), warnings
// and up unless debug.
func newLogger(debug bool) *slog.Logger {
	level := slog.LevelWarn
	if debug {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

func firstNonEmpty(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}
