// Package script runs policy scripts: scripted conversations — what the
// user says, and for each model round the calls the model makes and its
// final text — played against a gateway through the browser protocol, with
// the outcome of every call checked against what the script expects
// (ran, refused with a type, confirmation asked and answered, the
// arguments and result the browser saw, the turn's text, end and events).
// The model is the fake Gemini server's script brain: the gateway's real
// pipeline decides everything else. `gateway script run` wires a gateway
// in-process and hands it to Run.
package script

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Script is one file: a conversation in one session.
type Script struct {
	// Name names the script in reports; default: the file name.
	Name string `yaml:"name"`
	// Turns are played in order.
	Turns []Turn `yaml:"turns"`

	file string
}

// Turn is one user input and what the model does in answer. A turn without
// User is the one a confirmation answer starts (the answer to the previous
// turn's `confirm:` call).
type Turn struct {
	User   string     `yaml:"user"`
	Rounds []Round    `yaml:"rounds"`
	Expect TurnExpect `yaml:"expect"`
}

// Round is one model answer: the calls it makes (in one message, run
// concurrently by the gateway), or its final text.
type Round struct {
	Calls []Call `yaml:"calls"`
	Text  string `yaml:"text"`
}

// Call is one call the model makes, and what should become of it.
type Call struct {
	Tool   string         `yaml:"tool"`
	Args   map[string]any `yaml:"args"`
	Expect CallExpect     `yaml:"expect"`
}

// CallExpect is what a call's outcome must be; unset fields are not
// checked. At most one of Ran, Refused and Confirm is set.
type CallExpect struct {
	// Ran: true — the gateway executed the call (not refused); false —
	// it refused it, whatever the reason.
	Ran *bool `yaml:"ran"`
	// Error is the error type of a call that ran and failed (TRANSIENT,
	// PERMANENT, VALIDATION…); with ran: true and no error the call
	// must have succeeded.
	Error string `yaml:"error"`
	// Refused is the type the gateway refused the call with
	// (BUDGET_EXCEEDED, LOOP_DETECTED, MODE_RESTRICTED, NOT_FOUND…).
	Refused string `yaml:"refused"`
	// Confirm: the call is refused CONFIRMATION_REQUIRED, the browser is
	// asked, and the runner answers "approve" or "deny" once the turn is
	// done; the next turn of the script is the one the answer starts.
	Confirm string `yaml:"confirm"`
	// Args must be among the arguments the browser saw in tool.call
	// (redacted as the tool's allow-list says: "[redacted]").
	Args map[string]any `yaml:"args"`
	// Result must be among the result fields the browser saw in
	// tool.result (the tool's result allow-list).
	Result map[string]any `yaml:"result"`
}

// TurnExpect is what the browser must have seen of a turn; unset fields
// are not checked.
type TurnExpect struct {
	// Text is the turn's final text (text.done).
	Text *string `yaml:"text"`
	// Reason is turn.done's reason (end_turn, terminal_tool, finish,
	// max_iterations, error…).
	Reason string `yaml:"reason"`
	// Events are event types the browser must have received in this
	// order (others may come between them).
	Events []string `yaml:"events"`
	// NoEvents are event types the browser must not have received.
	NoEvents []string `yaml:"no_events"`
}

// ErrInvalid marks a script that cannot be run as written.
var ErrInvalid = errors.New("invalid script")

// Load reads and checks the script at path.
func Load(path string) (*Script, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}

// Parse decodes a script strictly (an unknown field is an error naming its
// line) and checks that it can be run; file names it in errors and
// reports.
func Parse(file string, data []byte) (*Script, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var s Script
	if err := dec.Decode(&s); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: %s: empty file", ErrInvalid, file)
		}
		return nil, fmt.Errorf("%w: %s: %s", ErrInvalid, file, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: %s: line %d: a script holds one YAML document, found another", ErrInvalid, file, extra.Line)
	}
	s.file = file
	if s.Name == "" {
		s.Name = file
	}
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalid, file, err)
	}
	return &s, nil
}

// File is where the script was read from.
func (s *Script) File() string { return s.file }

func (s *Script) check() error {
	if len(s.Turns) == 0 {
		return errors.New("no turns")
	}
	var errs []error
	confirming := false // the previous turn answers a confirmation
	for i, t := range s.Turns {
		where := fmt.Sprintf("turn %d", i+1)
		switch {
		case t.User == "" && !confirming:
			errs = append(errs, fmt.Errorf("%s: no user message (only the turn after a `confirm:` call has none)", where))
		case t.User != "" && confirming:
			errs = append(errs, fmt.Errorf("%s: the turn after a `confirm:` call is the one the answer starts: it has no user message", where))
		}
		if len(t.Rounds) == 0 {
			errs = append(errs, fmt.Errorf("%s: no model rounds", where))
		}
		confirms := 0
		for j, r := range t.Rounds {
			rwhere := fmt.Sprintf("%s, round %d", where, j+1)
			last := j == len(t.Rounds)-1
			switch {
			case len(r.Calls) == 0 && r.Text == "":
				errs = append(errs, fmt.Errorf("%s: neither calls nor text", rwhere))
			case len(r.Calls) == 0 && !last:
				errs = append(errs, fmt.Errorf("%s: a round without calls is the model's final answer: it must be the turn's last", rwhere))
			}
			for k, c := range r.Calls {
				cwhere := fmt.Sprintf("%s, call %d", rwhere, k+1)
				if err := c.check(); err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", cwhere, err))
				}
				if c.Expect.Confirm != "" {
					confirms++
				}
			}
		}
		if confirms > 1 {
			errs = append(errs, fmt.Errorf("%s: %d `confirm:` calls; a turn may answer one confirmation", where, confirms))
		}
		for _, ev := range append(append([]string(nil), t.Expect.Events...), t.Expect.NoEvents...) {
			if strings.TrimSpace(ev) == "" {
				errs = append(errs, fmt.Errorf("%s: an empty event type in expect", where))
			}
		}
		confirming = confirms > 0
	}
	if confirming {
		errs = append(errs, fmt.Errorf("turn %d has a `confirm:` call: add the turn the answer starts (no user message)", len(s.Turns)))
	}
	return errors.Join(errs...)
}

func (c Call) check() error {
	if c.Tool == "" {
		return errors.New("no tool")
	}
	e := c.Expect
	set := 0
	for _, on := range []bool{e.Ran != nil, e.Refused != "", e.Confirm != ""} {
		if on {
			set++
		}
	}
	switch {
	case set > 1:
		return errors.New("expect at most one of ran, refused and confirm")
	case e.Confirm != "" && e.Confirm != "approve" && e.Confirm != "deny":
		return fmt.Errorf("confirm: %q: want approve or deny", e.Confirm)
	case e.Error != "" && (e.Ran == nil || !*e.Ran):
		return errors.New("error is the type of a call that ran and failed: it needs ran: true")
	case e.Refused == "CONFIRMATION_REQUIRED":
		return errors.New("refused: CONFIRMATION_REQUIRED: say confirm: approve or confirm: deny (the runner answers the request)")
	}
	return nil
}
