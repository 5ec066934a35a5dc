package fakedemo

import (
	"fmt"
	"regexp"
)

// When a call needs the user's approval, the gateway refuses it
// (CONFIRMATION_REQUIRED), asks the user, and then tells the model the
// answer in a user message of its own: "[The user approved your pending
// call to NAME. Call NAME again now with exactly the same arguments.]" or
// "[The user declined your pending call to NAME. …]". The demo model does
// what a real one does with it: repeats its earlier call of NAME with the
// same arguments, or says it was not done. This is what lets a tool that
// needs confirmation be tried end to end offline ("/call create_ticket …",
// approve, the ticket is created).

var confirmNote = regexp.MustCompile(`^\[The user (approved|declined) your pending call to ([A-Za-z0-9_-]+)\.`)

// confirmation reads a confirmation note: the outcome ("approved" or
// "declined") and the tool; ok is false for any other text.
func confirmation(text string) (outcome, tool string, ok bool) {
	m := confirmNote.FindStringSubmatch(text)
	if m == nil {
		return "", "", false
	}
	return m[1], m[2], true
}

// IsConfirmation reports whether text is the gateway's note of a
// confirmation outcome.
func IsConfirmation(text string) bool {
	_, _, ok := confirmation(text)
	return ok
}

// answerConfirmation repeats the newest earlier call of an approved tool,
// or says that a declined one was not run.
func answerConfirmation(outcome, tool string, in Input) Action {
	if outcome == "declined" {
		return say(fmt.Sprintf("All right: I did not run %s.", tool))
	}
	for i := len(in.Earlier) - 1; i >= 0; i-- {
		if c := in.Earlier[i]; c.Name == tool {
			return Action{Calls: []Call{c}}
		}
	}
	return say(fmt.Sprintf("You approved %s, but I can't find my earlier call of it in this conversation.", tool))
}
