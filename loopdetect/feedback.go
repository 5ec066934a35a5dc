package loopdetect

// Feedback returns the message the model gets when a call of tool is
// refused by rule. It steers the model to a different approach and never
// contains the call's arguments: repeating them back to a model makes it
// more likely to send them again. The tool name is the only variable part.
func (d *Detector) Feedback(rule Rule, tool string) string {
	switch rule {
	case RepeatedCall:
		return "This call was not run: " + tool + " was already called twice in this turn with exactly these " +
			"arguments, and running it again would give the same result. Do not repeat it. Use the results you " +
			"already have to answer, phrase the request in a genuinely different way, use another tool, or tell " +
			"the user what you could not find."
	case EmptyResults:
		return "This call was not run: " + tool + " has already returned nothing twice in this turn, so it " +
			"will not be run again until the next turn. Do not retry it with different wording. Answer with " +
			"what you already know, use another tool if one fits, or tell the user that nothing was found."
	default:
		return "This call was not run because it looks like a loop. Try a different approach, or answer the " +
			"user with what you already know."
	}
}
