// Package fakeopenai is a fake OpenAI-compatible Chat Completions server for
// loopback use. It speaks the real wire protocol (POST /v1/chat/completions,
// streamed as server-sent "data: {chat.completion.chunk}" events ending in
// "data: [DONE]", or one chat.completion object) so that the unmodified
// openai-go client, or any other, can talk to it; it checks requests the way
// the real API does (message order, tool_call pairing, tool_choice without
// tools, ...) and answers errors with the real error body. What the "model"
// says comes from a pluggable Brain: tests program a ScriptBrain, the offline
// demo runs the rule-based DemoBrain.
package fakeopenai
