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
		return "This call was not run: " + tool + " has already come back empty twice in this turn, once for " +
			"exactly this request, and the gateway does not repeat a request that found nothing. Data may not " +
			"exist. Try different search terms or a different tool."
	default:
		return "This call was not run because it looks like a loop. Try a different approach, or answer the " +
			"user with what you already know."
	}
}
