// Package otlptest is an OTLP trace receiver for tests: it takes real
// OTLP exports over HTTP (protobuf) or gRPC, decoded with the collector's
// own proto types, and keeps the spans for a test to look at.
package otlptest

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
)

// Span is one received span, flattened for assertions.
type Span struct {
	TraceID, SpanID, ParentID string // hex; ParentID "" for a root
	Name                      string
	Kind                      tracepb.Span_SpanKind
	Attrs                     map[string]any // string, int64, bool, float64
	Events                    []Event
	Links                     []string // the linked spans' "traceid-spanid"
	Error                     bool     // status code ERROR
	Resource                  map[string]any
}

// Event is one span event.
type Event struct {
	Name  string
	Attrs map[string]any
}

// HasEvent reports whether the span has an event of that name.
func (s Span) HasEvent(name string) bool {
	for _, e := range s.Events {
		if e.Name == name {
			return true
		}
	}
	return false
}

// Receiver is a running OTLP trace receiver.
type Receiver struct {
	// Endpoint is what OTEL_EXPORTER_OTLP_ENDPOINT is set to for it.
	Endpoint string
	// Protocol is what OTEL_EXPORTER_OTLP_PROTOCOL is set to for it.
	Protocol string

	mu      sync.Mutex
	spans   []Span
	headers []map[string]string // of each export, lower-case names
	stall   chan struct{}       // non-nil: exports wait until it is closed
}

// StartHTTP starts a receiver of OTLP/HTTP protobuf exports on loopback,
// stopped at the test's end.
func StartHTTP(t testing.TB) *Receiver {
	r := &Receiver{Protocol: "http/protobuf"}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", r.serveHTTP)
	ln := listen(t)
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		r.Release()
		_ = srv.Close()
	})
	r.Endpoint = "http://" + ln.Addr().String()
	return r
}

// StartGRPC starts a receiver of OTLP/gRPC exports on loopback, stopped at
// the test's end.
func StartGRPC(t testing.TB) *Receiver {
	r := &Receiver{Protocol: "grpc"}
	ln := listen(t)
	srv := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(srv, grpcService{r: r})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		r.Release()
		srv.Stop()
	})
	r.Endpoint = "http://" + ln.Addr().String()
	return r
}

func listen(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// Env sets the process environment so that the gateway exports to r (the
// SDK's exporters read the process environment). Not for parallel tests.
func (r *Receiver) Env(t testing.TB) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", r.Endpoint)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", r.Protocol)
	// A short batch delay: spans reach the receiver soon after they end.
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
}

// Stall makes exports wait (a slow collector) until Release.
func (r *Receiver) Stall() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stall == nil {
		r.stall = make(chan struct{})
	}
}

// Release lets stalled exports through.
func (r *Receiver) Release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stall != nil {
		close(r.stall)
		r.stall = nil
	}
}

// Spans returns the spans received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Headers returns the headers (gRPC metadata) of each export so far.
func (r *Receiver) Headers() []map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]map[string]string(nil), r.headers...)
}

func (r *Receiver) wait(ctx context.Context) {
	r.mu.Lock()
	stall := r.stall
	r.mu.Unlock()
	if stall == nil {
		return
	}
	select {
	case <-stall:
	case <-ctx.Done():
	}
}

func (r *Receiver) serveHTTP(w http.ResponseWriter, req *http.Request) {
	r.wait(req.Context())
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var in collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &in); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	h := map[string]string{}
	for k := range req.Header {
		h[http.CanonicalHeaderKey(k)] = req.Header.Get(k)
	}
	r.take(&in, h)
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

type grpcService struct {
	collectortrace.UnimplementedTraceServiceServer
	r *Receiver
}

func (g grpcService) Export(ctx context.Context, in *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	g.r.wait(ctx)
	h := map[string]string{}
	md, _ := metadata.FromIncomingContext(ctx)
	for k, v := range md {
		if len(v) > 0 {
			h[http.CanonicalHeaderKey(k)] = v[0]
		}
	}
	g.r.take(in, h)
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

func (r *Receiver) take(in *collectortrace.ExportTraceServiceRequest, headers map[string]string) {
	var got []Span
	for _, rs := range in.GetResourceSpans() {
		res := attrs(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				sp := Span{TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
					Name: s.GetName(), Kind: s.GetKind(), Attrs: attrs(s.GetAttributes()), Resource: res,
					Error: s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR}
				if p := s.GetParentSpanId(); len(p) > 0 {
					sp.ParentID = hex.EncodeToString(p)
				}
				for _, e := range s.GetEvents() {
					sp.Events = append(sp.Events, Event{Name: e.GetName(), Attrs: attrs(e.GetAttributes())})
				}
				for _, l := range s.GetLinks() {
					sp.Links = append(sp.Links, hex.EncodeToString(l.GetTraceId())+"-"+hex.EncodeToString(l.GetSpanId()))
				}
				got = append(got, sp)
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	r.headers = append(r.headers, headers)
	r.mu.Unlock()
}

func attrs(kvs []*commonpb.KeyValue) map[string]any {
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		v := kv.GetValue()
		switch v.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.GetKey()] = v.GetStringValue()
		case *commonpb.AnyValue_IntValue:
			m[kv.GetKey()] = v.GetIntValue()
		case *commonpb.AnyValue_BoolValue:
			m[kv.GetKey()] = v.GetBoolValue()
		case *commonpb.AnyValue_DoubleValue:
			m[kv.GetKey()] = v.GetDoubleValue()
		default:
			m[kv.GetKey()] = v.String()
		}
	}
	return m
}
