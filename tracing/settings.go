package tracing

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/turnstile-gw/turnstile/internal/pseudonym"
	"github.com/turnstile-gw/turnstile/internal/settings"
)

// Protocols of the OTLP trace exporter (OTEL_EXPORTER_OTLP_PROTOCOL).
const (
	ProtocolHTTP = "http/protobuf"
	ProtocolGRPC = "grpc"
)

// Settings are what the standard OpenTelemetry variables say about
// tracing. Everything else they say (endpoint, headers, timeout,
// compression, TLS, sampler, batch processor, resource) the SDK and its
// exporters read themselves, from the process environment.
type Settings struct {
	// Enabled: OTEL_EXPORTER_OTLP_ENDPOINT or
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set, OTEL_SDK_DISABLED is not
	// true and OTEL_TRACES_EXPORTER is not none.
	Enabled bool
	// Protocol is ProtocolHTTP (the default) or ProtocolGRPC, from
	// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL.
	Protocol string
	// CaptureContent: OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT
	// is true; message text and allow-listed tool arguments and results go
	// into spans.
	CaptureContent bool
	// MaxQueueSize is the batch span processor's queue
	// (OTEL_BSP_MAX_QUEUE_SIZE, default 2048): spans beyond it are dropped
	// and counted.
	MaxQueueSize int
	// PseudonymKey is the HMAC key of the user pseudonyms in traces (and
	// timelines), TURNSTILE_PSEUDONYM_KEY; "" is a key derived from the
	// auth secret, else a random one per process (Options.Users).
	PseudonymKey settings.Secret
}

// PseudonymKeySetting is the row of the one tracing setting of the
// gateway's own; the OTEL_* variables are read by ReadEnv.
func PseudonymKeySetting() settings.Setting[Settings] {
	return settings.Setting[Settings]{Env: "TURNSTILE_PSEUDONYM_KEY", Secret: true,
		DefDoc: "unset: derived from TURNSTILE_AUTH_SECRET; without one, random at each start",
		Usage: "HMAC key of the user pseudonyms in traces (u_ and 32 hex digits), at least 32 bytes; the same on every node " +
			"for stable pseudonyms",
		Apply: func(s *Settings, v string) error {
			if v != "" && len(v) < pseudonym.MinKeyBytes {
				return fmt.Errorf("must be at least %d bytes", pseudonym.MinKeyBytes)
			}
			s.PseudonymKey = settings.Secret(v)
			return nil
		}}
}

// DefaultMaxQueueSize is the SDK's default OTEL_BSP_MAX_QUEUE_SIZE.
const DefaultMaxQueueSize = 2048

// SettingsFromEnv reads the variables that decide whether and how the
// gateway traces. Booleans follow the SDK's rule (only "true", in any case,
// is true); an exporter protocol the gateway does not speak is an error
// naming the variable.
func SettingsFromEnv(getenv func(string) string) (Settings, error) {
	var s Settings
	err := s.ReadEnv(getenv)
	return s, err
}

// ReadEnv is SettingsFromEnv into s, whose PseudonymKey it leaves alone.
func (s *Settings) ReadEnv(getenv func(string) string) error {
	s.Protocol, s.MaxQueueSize = ProtocolHTTP, DefaultMaxQueueSize
	isTrue := func(k string) bool { return strings.EqualFold(strings.TrimSpace(getenv(k)), "true") }
	s.CaptureContent = isTrue("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")

	endpoint := getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
	exporter := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER"))
	switch exporter {
	case "", "otlp", "none":
	default:
		return fmt.Errorf("OTEL_TRACES_EXPORTER=%s: the gateway exports traces with otlp (or none)", exporter)
	}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		v := strings.TrimSpace(getenv(k))
		if v == "" {
			continue
		}
		if v != ProtocolHTTP && v != ProtocolGRPC {
			return fmt.Errorf("%s=%s: must be http/protobuf or grpc", k, v)
		}
		s.Protocol = v
		break
	}
	if v := strings.TrimSpace(getenv("OTEL_BSP_MAX_QUEUE_SIZE")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return fmt.Errorf("OTEL_BSP_MAX_QUEUE_SIZE=%s: must be a whole number above 0", v)
		}
		s.MaxQueueSize = n
	}
	s.Enabled = endpoint && !isTrue("OTEL_SDK_DISABLED") && exporter != "none"
	return nil
}
