package gateway

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// The gateway's own log handler escapes what clients send (a user id that
// reverses the rest of the line, a newline) and still writes durations as
// Go durations.
func TestGatewayLogEscapesClientStrings(t *testing.T) {
	var buf bytes.Buffer
	slog.New(LogHandler(&buf, slog.LevelInfo)).Info("session started", "user", "mallory\u202etxt.exe\nforged", "idle", 20*time.Second)
	line := buf.String()
	if strings.Contains(line, "\u202e") || strings.Count(line, "\n") != 1 {
		t.Fatalf("client text written raw: %q", line)
	}
	if !strings.Contains(line, `mallory\\u202etxt.exe\nforged`) || !strings.Contains(line, `"idle":"20s"`) {
		t.Fatalf("line %s", line)
	}
}
