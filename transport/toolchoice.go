package transport

// Tool choices: whether a text model may (auto), must (required) or must
// not (none) call the declared tools. Each text adapter maps them to its
// provider's form (OpenAI tool_choice, Gemini functionCallingConfig.mode).
const (
	ToolChoiceAuto     = "auto"
	ToolChoiceRequired = "required"
	ToolChoiceNone     = "none"
)

// ValidToolChoice reports whether s is one of the tool choices.
func ValidToolChoice(s string) bool {
	switch s {
	case ToolChoiceAuto, ToolChoiceRequired, ToolChoiceNone:
		return true
	}
	return false
}
