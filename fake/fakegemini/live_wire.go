package fakegemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/genai"
)

// errBadClientMessage marks a client frame the real service would refuse
// with close 1007; errBadModel a setup whose model name is malformed.
var (
	errBadClientMessage = errors.New("invalid client message")
	errBadModel         = errors.New("malformed model name")
)

// wireClientMessage is the union of every frame a Live client sends. genai
// types decode the Gemini API wire JSON directly, except where the SDK
// quotes int64s (see wireSetup).
type wireClientMessage struct {
	Setup         *wireSetup         `json:"setup"`
	ClientContent *wireClientContent `json:"clientContent"`
	RealtimeInput *wireRealtimeInput `json:"realtimeInput"`
	ToolResponse  *wireToolResponse  `json:"toolResponse"`
}

// wireSetup shadows the genai setup's contextWindowCompression: the SDK
// sends its int64s as JSON strings, other clients may send numbers, and
// the genai type accepts only the former.
type wireSetup struct {
	genai.LiveClientSetup
	ContextWindowCompression *wireCompression `json:"contextWindowCompression"`
}

type wireCompression struct {
	TriggerTokens *flexInt64 `json:"triggerTokens"`
	SlidingWindow *struct {
		TargetTokens *flexInt64 `json:"targetTokens"`
	} `json:"slidingWindow"`
}

type wireClientContent struct {
	Turns        []*genai.Content `json:"turns"`
	TurnComplete bool             `json:"turnComplete"`
}

type wireRealtimeInput struct {
	Audio          *genai.Blob   `json:"audio"`
	AudioStreamEnd bool          `json:"audioStreamEnd"`
	Video          *genai.Blob   `json:"video"`
	MediaChunks    []*genai.Blob `json:"mediaChunks"`
	Text           string        `json:"text"`
	ActivityStart  *struct{}     `json:"activityStart"`
	ActivityEnd    *struct{}     `json:"activityEnd"`
}

type wireToolResponse struct {
	FunctionResponses []*genai.FunctionResponse `json:"functionResponses"`
}

// flexInt64 is an int64 given as a JSON number or a quoted decimal string,
// as proto3 JSON allows.
type flexInt64 int64

func (n *flexInt64) UnmarshalJSON(data []byte) error {
	s := string(bytes.TrimSpace(data))
	if unq, err := strconv.Unquote(s); err == nil {
		s = unq
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("int64 %s: %w", data, err)
	}
	*n = flexInt64(v)
	return nil
}

func (n *flexInt64) ptr() *int64 {
	if n == nil {
		return nil
	}
	v := int64(*n)
	return &v
}

// decodeSetup parses the first client frame, which must be
// {"setup":{"model":"models/..."}} on the Gemini API and
// {"setup":{"model":"projects/{p}/locations/{l}/publishers/{pub}/models/..."}}
// on Vertex AI.
func decodeSetup(data []byte, api API) (LiveSetup, error) {
	var msg wireClientMessage
	if err := json.Unmarshal(data, &msg); err != nil {
		return LiveSetup{}, fmt.Errorf("setup: %w: %w", errBadClientMessage, err)
	}
	w := msg.Setup
	if w == nil {
		return LiveSetup{}, fmt.Errorf("setup: %w: the first message is not a setup", errBadClientMessage)
	}
	var model, project, location string
	if api == VertexAI {
		var ok bool
		if project, location, model, ok = vertexModel(w.Model); !ok {
			return LiveSetup{}, fmt.Errorf("setup: %w: %w: model %q is not projects/{project}/locations/{location}/publishers/{publisher}/models/{model}",
				errBadClientMessage, errBadModel, w.Model)
		}
	} else if m, ok := strings.CutPrefix(w.Model, "models/"); ok && m != "" && !strings.Contains(m, "/") {
		model = m
	} else {
		return LiveSetup{}, fmt.Errorf("setup: %w: %w: model %q is not models/{model}", errBadClientMessage, errBadModel, w.Model)
	}
	var raw struct {
		Setup json.RawMessage `json:"setup"`
	}
	_ = json.Unmarshal(data, &raw) // cannot fail: data decoded above
	s := LiveSetup{
		Model:                    model,
		ModelName:                w.Model,
		Project:                  project,
		Location:                 location,
		GenerationConfig:         w.GenerationConfig,
		SystemInstruction:        w.SystemInstruction,
		Tools:                    w.Tools,
		SessionResumption:        w.SessionResumption,
		InputAudioTranscription:  w.InputAudioTranscription,
		OutputAudioTranscription: w.OutputAudioTranscription,
		RealtimeInputConfig:      w.RealtimeInputConfig,
		Raw:                      raw.Setup,
	}
	if c := w.ContextWindowCompression; c != nil {
		s.ContextWindowCompression = &genai.ContextWindowCompressionConfig{TriggerTokens: c.TriggerTokens.ptr()}
		if c.SlidingWindow != nil {
			s.ContextWindowCompression.SlidingWindow = &genai.SlidingWindow{TargetTokens: c.SlidingWindow.TargetTokens.ptr()}
		}
	}
	return s, nil
}

// decodeClientMessage splits one client frame into events. A realtimeInput
// carrying several fields yields one event per field, in a fixed order.
func decodeClientMessage(data []byte) ([]ClientEvent, error) {
	var msg wireClientMessage
	if err := json.Unmarshal(data, &msg); err != nil {
		return nil, fmt.Errorf("%w: %w", errBadClientMessage, err)
	}
	var evs []ClientEvent
	if msg.Setup != nil {
		return nil, fmt.Errorf("%w: setup sent twice", errBadClientMessage)
	}
	if c := msg.ClientContent; c != nil {
		evs = append(evs, ClientEvent{Kind: EventClientContent, Turns: c.Turns, TurnComplete: c.TurnComplete})
	}
	if r := msg.RealtimeInput; r != nil {
		if r.ActivityStart != nil {
			evs = append(evs, ClientEvent{Kind: EventActivityStart})
		}
		if r.Audio != nil {
			evs = append(evs, ClientEvent{Kind: EventAudio, Data: r.Audio.Data, MIMEType: r.Audio.MIMEType})
		}
		if r.Video != nil {
			evs = append(evs, ClientEvent{Kind: EventVideo, Data: r.Video.Data, MIMEType: r.Video.MIMEType})
		}
		for _, b := range r.MediaChunks {
			if b != nil {
				evs = append(evs, ClientEvent{Kind: EventMedia, Data: b.Data, MIMEType: b.MIMEType})
			}
		}
		if r.Text != "" {
			evs = append(evs, ClientEvent{Kind: EventText, Text: r.Text})
		}
		if r.ActivityEnd != nil {
			evs = append(evs, ClientEvent{Kind: EventActivityEnd})
		}
		if r.AudioStreamEnd {
			evs = append(evs, ClientEvent{Kind: EventAudioStreamEnd})
		}
	}
	if t := msg.ToolResponse; t != nil {
		evs = append(evs, ClientEvent{Kind: EventToolResponse, FunctionResponses: t.FunctionResponses})
	}
	if len(evs) == 0 && msg.ClientContent == nil && msg.RealtimeInput == nil && msg.ToolResponse == nil {
		return nil, fmt.Errorf("%w: no clientContent, realtimeInput or toolResponse", errBadClientMessage)
	}
	return evs, nil
}

// Server frames. Keys follow the proto3 JSON the real service emits, which
// omits default values.

const liveAudioMIME = "audio/pcm;rate=24000"

func serverContent(fields map[string]any) map[string]any {
	return map[string]any{"serverContent": fields}
}

func modelTurnPart(part map[string]any) map[string]any {
	return serverContent(map[string]any{"modelTurn": map[string]any{"role": "model", "parts": []any{part}}})
}

func audioMessage(pcm []byte) map[string]any {
	return modelTurnPart(map[string]any{"inlineData": map[string]any{"mimeType": liveAudioMIME, "data": pcm}})
}

func transcriptionMessage(field, text string) map[string]any {
	return serverContent(map[string]any{field: map[string]any{"text": text}})
}

// turnCompleteMessage ends a turn with usage in the API's field names: the
// Gemini API's Live usage says responseTokenCount, Vertex AI's says
// candidatesTokenCount (its SDK renames it).
func turnCompleteMessage(usage *genai.UsageMetadata, api API) map[string]any {
	m := serverContent(map[string]any{"turnComplete": true})
	if usage == nil {
		return m
	}
	if api != VertexAI {
		m["usageMetadata"] = usage
		return m
	}
	var u map[string]any
	data, _ := json.Marshal(usage) // plain struct of numbers and strings
	_ = json.Unmarshal(data, &u)
	for from, to := range map[string]string{"responseTokenCount": "candidatesTokenCount", "responseTokensDetails": "candidatesTokensDetails"} {
		if v, ok := u[from]; ok {
			delete(u, from)
			u[to] = v
		}
	}
	m["usageMetadata"] = u
	return m
}

func toolCallMessage(calls []Call) map[string]any {
	fcs := make([]any, len(calls))
	for i, c := range calls {
		args := c.Args
		if args == nil {
			args = map[string]any{}
		}
		fcs[i] = map[string]any{"id": c.ID, "name": c.Name, "args": args}
	}
	return map[string]any{"toolCall": map[string]any{"functionCalls": fcs}}
}

// goAwayMessage encodes timeLeft as a protobuf Duration string ("50s",
// "0.5s"): the SDK parses it with time.ParseDuration and fails on numbers.
func goAwayMessage(timeLeft time.Duration) map[string]any {
	return map[string]any{"goAway": map[string]any{"timeLeft": protoDuration(timeLeft)}}
}

func resumptionMessage(handle string) map[string]any {
	u := map[string]any{}
	if handle != "" {
		u["newHandle"] = handle
		u["resumable"] = true
	}
	return map[string]any{"sessionResumptionUpdate": u}
}
