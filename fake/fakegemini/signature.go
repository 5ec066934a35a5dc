package fakegemini

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"sync"

	"google.golang.org/genai"
)

// SignedBrain makes the brain it wraps behave like a thinking model that
// signs its function calls (Gemini 3 and later): the first function call
// of every reply carries a thoughtSignature, and a request whose history
// does not carry those signatures back unchanged is refused, as the real
// API refuses it:
//
//   - In the current turn (the contents after the last user content that
//     is not only function responses), the first functionCall part of each
//     model content must carry its signature, or the request is answered
//     400 INVALID_ARGUMENT "Function call is missing a thought_signature in
//     functionCall parts. ..." (Vertex AI: "Unable to submit request
//     because function call `NAME` in the N. content block is missing a
//     `thought_signature`. ..."). Earlier turns are not checked, as with the
//     real API.
//   - Anywhere in the history, a signature this brain did not issue, or
//     one moved to a call of another name, is answered 400 INVALID_ARGUMENT
//     "Corrupted thought signature.".
//
// A refused request never reaches the wrapped brain (a ScriptBrain does not
// record it or use up a step). Calls a step already gave a Signature keep
// it (and it then counts as issued). Signatures are opaque random bytes,
// valid for the life of the SignedBrain. It is safe for concurrent use.
type SignedBrain struct {
	inner Brain

	mu     sync.Mutex
	issued map[string]string // signature -> name of the call it was issued on
}

// RequireThoughtSignatures wraps b as a thinking model that signs its
// function calls and requires the signatures back (see SignedBrain).
func RequireThoughtSignatures(b Brain) *SignedBrain {
	return &SignedBrain{inner: b, issued: make(map[string]string)}
}

// Respond checks the history's signatures, then asks the wrapped brain and
// signs the first function call of its reply.
func (b *SignedBrain) Respond(ctx context.Context, req *Request) Reply {
	if r, bad := b.check(req); bad {
		return r
	}
	reply := b.inner.Respond(ctx, req)
	reply.Chunks = append([]Chunk(nil), reply.Chunks...) // a step's reply may be reused (Fixed)
	signed := false
	for i := range reply.Chunks {
		calls := reply.Chunks[i].Calls
		if len(calls) == 0 {
			continue
		}
		calls = append([]Call(nil), calls...)
		for j := range calls {
			sig := calls[j].Signature
			if len(sig) == 0 && !signed {
				sig = newSignature()
				calls[j].Signature = sig
			}
			signed = true
			if len(sig) > 0 {
				b.mu.Lock()
				b.issued[string(sig)] = calls[j].Name
				b.mu.Unlock()
			}
		}
		reply.Chunks[i].Calls = calls
	}
	return reply
}

// Issued reports how many signatures the brain has handed out.
func (b *SignedBrain) Issued() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.issued)
}

func (b *SignedBrain) check(req *Request) (Reply, bool) {
	// A signature that was not issued (or not on this call) is refused
	// wherever it is, before missing ones are looked for.
	for _, c := range req.Contents {
		if c == nil || c.Role != genai.RoleModel {
			continue
		}
		for _, p := range c.Parts {
			if p != nil && p.FunctionCall != nil && len(p.ThoughtSignature) > 0 && !b.valid(p.ThoughtSignature, p.FunctionCall.Name) {
				return ErrorReply(http.StatusBadRequest, "INVALID_ARGUMENT", "Corrupted thought signature."), true
			}
		}
	}
	turnStart := 0
	for i, c := range req.Contents {
		if c != nil && c.Role != genai.RoleModel && hasNonResponsePart(c) {
			turnStart = i
		}
	}
	for i := turnStart + 1; i < len(req.Contents); i++ {
		c := req.Contents[i]
		if c == nil || c.Role != genai.RoleModel {
			continue
		}
		for _, p := range c.Parts {
			if p == nil || p.FunctionCall == nil {
				continue
			}
			if len(p.ThoughtSignature) == 0 {
				return ErrorReply(http.StatusBadRequest, "INVALID_ARGUMENT", missingSignature(req.API, p.FunctionCall.Name, i+1)), true
			}
			break // only the first call of a step carries one
		}
	}
	return Reply{}, false
}

func (b *SignedBrain) valid(sig []byte, name string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	issuedFor, ok := b.issued[string(sig)]
	return ok && issuedFor == name
}

// missingSignature is the real APIs' message for a function call of the
// current turn sent back without its signature; position is the 1-based
// index of the content.
func missingSignature(api API, name string, position int) string {
	if api == VertexAI {
		return fmt.Sprintf("Unable to submit request because function call `%s` in the %d. content block is missing "+
			"a `thought_signature`. Learn more: https://docs.cloud.google.com/vertex-ai/generative-ai/docs/thought-signatures",
			name, position)
	}
	return fmt.Sprintf("Function call is missing a thought_signature in functionCall parts. This is required for "+
		"tools to work correctly, and missing thought_signature may lead to degraded model performance. Additional "+
		"data, function call `default_api:%s` , position %d. Please refer to "+
		"https://ai.google.dev/gemini-api/docs/thought-signatures for more details.", name, position)
}

// hasNonResponsePart reports whether c holds anything but function
// responses: such a user content starts a new turn.
func hasNonResponsePart(c *genai.Content) bool {
	for _, p := range c.Parts {
		if p != nil && p.FunctionResponse == nil {
			return true
		}
	}
	return false
}

func newSignature() []byte {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return append([]byte("fake-thought-signature:"), b...)
}
