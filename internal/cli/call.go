package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/coder/websocket"

	"github.com/turnstile-gw/turnstile/audio"
	"github.com/turnstile-gw/turnstile/internal/clock"
	"github.com/turnstile-gw/turnstile/internal/speechlike"
	"github.com/turnstile-gw/turnstile/telephony/twilio/caller"
)

// `gateway call` places a phone call to a gateway as Twilio would, so that
// a call can be heard without a phone number or a Twilio account: the
// voice webhook (signed with TWILIO_AUTH_TOKEN when set), the stream the
// TwiML names, then the caller's audio in 20 ms μ-law frames at real-time
// pace — a WAV file, or the demo utterance (1.6 s of a speech-like sound:
// the offline demo model hears speech by its energy) — then silence, as a
// phone line sends. The answer is "played" at real-time pace: marks are
// echoed when the audio before them would have finished, a clear drops
// what had not been played yet. What was played is written to a WAV file.
//
// Twilio's Media Streams carry audio only: there is no transcript on the
// wire. The command prints the call as it went instead — each answer's
// length, barge-ins, the keys pressed, who hung up — and says where the
// words are (the session's history).

const (
	// demoUtterance is the built-in caller's speech.
	demoUtterance = 1600 * time.Millisecond
	// callFrame is the audio in one media frame: Twilio sends 20 ms.
	callFrame = 20 * time.Millisecond
	// defaultCallTimeout bounds a call: the demo model's answer to the
	// demo utterance takes a few seconds.
	defaultCallTimeout = 30 * time.Second
	// mulawSilence is μ-law's code for 0.
	mulawSilence = 0xFF
)

// callOptions is one `gateway call`.
type callOptions struct {
	caller caller.Config
	speech []byte // the caller's audio, μ-law 8 kHz
	what   string // what speech is, for the log
	press  string // DTMF keys pressed after the first answer
	out    string // the answer's WAV file; "" writes none
}

// Call is `gateway call`: it places a phone call to the gateway as Twilio
// does (the webhook, then the media stream), speaks, and writes what it hears.
func Call(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gateway call", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := getenv("TURNSTILE_ADDR")
	if addr == "" {
		addr = "127.0.0.1:8080"
	}
	webhook := fs.String("url", "http://"+addr+"/v1/telephony/twilio",
		"the gateway's voice webhook (default from $TURNSTILE_ADDR)")
	token := fs.String("twilio-auth-token", "", "sign as Twilio with this auth token (default: $TWILIO_AUTH_TOKEN)")
	streamURL := fs.String("stream-url", "", "dial this WebSocket URL instead of the TwiML's (a gateway whose "+
		"TURNSTILE_PUBLIC_URL is a proxy in front of it); the upgrade is still signed with the TwiML's URL")
	in := fs.String("in", "", "a WAV file (PCM16 mono, 8 kHz or more) to say; default: the demo utterance")
	out := fs.String("out", "answer.wav", "write what the gateway played to this WAV file (8 kHz PCM16); empty: none")
	press := fs.String("press", "", "keys to press after the first answer, e.g. 1 to approve a confirmation")
	from := fs.String("from", "+15550100001", "the caller's number")
	to := fs.String("to", "+15550100002", "the number called")
	timeout := fs.Duration("timeout", defaultCallTimeout, "hang up after this long whatever happens")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *token == "" {
		*token = getenv("TWILIO_AUTH_TOKEN")
	}
	if strings.Trim(*press, "0123456789*#") != "" || *timeout <= 0 || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "gateway call: -press takes only 0-9, * and #; -timeout must be positive; no arguments")
		return 2
	}
	opts := callOptions{caller: caller.Config{WebhookURL: *webhook, AuthToken: *token, StreamURL: *streamURL,
		From: *from, To: *to}, press: *press, out: *out}
	var err error
	if opts.speech, opts.what, err = callSpeech(*in); err != nil {
		fmt.Fprintf(stderr, "gateway call: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if err := placeCall(ctx, opts, stdout); err != nil {
		fmt.Fprintf(stderr, "gateway call: %v\n", err)
		return 1
	}
	return 0
}

// callSpeech is the caller's audio as μ-law 8 kHz: the WAV file at path,
// or the demo utterance.
func callSpeech(path string) ([]byte, string, error) {
	if path == "" {
		pcm := speechlike.Render(audio.CarrierRate, int(demoUtterance.Seconds()*audio.CarrierRate))
		return audio.AppendMulaw(nil, pcm), fmt.Sprintf("the demo utterance (%v of a speech-like sound)", demoUtterance), nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, "", err
	}
	defer func() { _ = f.Close() }()
	w, err := readWAV(f)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	what := fmt.Sprintf("%s (%.1f s at %d Hz)", path, float64(len(w.pcm)/2)/float64(w.rate), w.rate)
	if w.rate == audio.CarrierRate {
		return audio.AppendMulaw(nil, w.pcm), what, nil
	}
	conv, err := audio.NewOutboundFrom(w.rate)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	return conv.Convert(nil, w.pcm), what, nil
}

// placeCall makes the call, logs it to w and writes the answer's WAV.
func placeCall(ctx context.Context, opts callOptions, w io.Writer) error {
	c, err := caller.Dial(ctx, opts.caller)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "call %s from %s to %s: webhook %s answered; stream %s open\n",
		c.CallSID, opts.caller.From, opts.caller.To, opts.caller.WebhookURL, c.StreamSID)
	fmt.Fprintf(w, "saying %s, then silence\n", opts.what)
	p := &phone{c: c, w: w, opts: opts, started: clock.Wall.Now()}
	err = p.run(ctx)
	if opts.out != "" {
		if werr := p.writeAnswer(opts.out); werr != nil && err == nil {
			err = werr
		}
	}
	fmt.Fprintln(w, "transcript: none on the wire — Twilio's Media Streams carry audio only. The model's words are "+
		"in the session's history (its user is the caller's pseudonym); listen to the answer file to hear them.")
	return err
}

// phone is the caller's handset during a call: it sends the caller's
// audio, plays the gateway's at real-time pace and echoes marks as they
// are played. One goroutine runs it; a second reads the stream.
type phone struct {
	c       *caller.Call
	w       io.Writer
	opts    callOptions
	started time.Time

	played      []byte    // μ-law the caller has heard or will hear
	playedUntil time.Time // when the audio received so far will have played
	marks       []mark    // sent by the gateway, not yet played
	answerEnd   int       // len(played) at the last mark played
	answers     int       // answers played to their mark
	pressed     bool
}

// mark is a mark waiting for the audio before it to be played.
type mark struct {
	name string
	due  time.Time
	end  int // len(played) when it arrived
}

// run drives the call until it ends: the caller has heard its answers
// (hang up), the gateway hangs up, or ctx ends.
func (p *phone) run(ctx context.Context) error {
	msgs := make(chan caller.Message, 64)
	ended := make(chan error, 1)
	done := make(chan struct{})
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		for {
			m, err := p.c.Next(context.Background())
			if err != nil {
				ended <- err
				return
			}
			m.Audio = bytes.Clone(m.Audio) // valid only until the next Next
			select {
			case msgs <- m:
			case <-done:
				return
			}
		}
	}()
	defer func() {
		close(done)
		_ = p.c.Close()
		<-readerDone
	}()
	want := 1
	if p.opts.press != "" {
		want = 2 // the first answer, then the one to the keys
	}
	silence := bytes.Repeat([]byte{mulawSilence}, audio.MulawFrame)
	ticker := clock.Wall.NewTicker(callFrame)
	defer ticker.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			p.logf("no end after %d answers: hanging up (%v)", p.answers, context.Cause(ctx))
			p.hangUp()
			return fmt.Errorf("the call did not finish: %w", ctx.Err())
		case err := <-ended:
			for len(msgs) > 0 {
				p.onMessage(<-msgs, clock.Wall.Now())
			}
			if caller.CloseStatus(err) == websocket.StatusNormalClosure {
				p.logf("the gateway hung up after %d answers", p.answers)
				return nil
			}
			return fmt.Errorf("the stream ended: %w", err)
		case m := <-msgs:
			p.onMessage(m, clock.Wall.Now())
		case now := <-ticker.C:
			if err := p.tick(ctx, now, i, silence); err != nil {
				return err
			}
			if p.answers >= want && len(p.marks) == 0 {
				p.logf("heard the answers (%d): hanging up", p.answers)
				p.hangUp()
				return nil
			}
		}
	}
}

// tick is one 20 ms of the call: marks played by now are echoed, one
// frame of the caller's audio (or silence) is sent, and after the first
// answer the keys are pressed.
func (p *phone) tick(ctx context.Context, now time.Time, i int, silence []byte) error {
	for len(p.marks) > 0 && !now.Before(p.marks[0].due) {
		if err := p.markPlayed(ctx); err != nil {
			return err
		}
	}
	frame := silence
	if off := i * audio.MulawFrame; off < len(p.opts.speech) {
		frame = p.opts.speech[off:min(off+audio.MulawFrame, len(p.opts.speech))]
	}
	if err := p.c.SendMedia(ctx, frame); err != nil {
		return err
	}
	if p.opts.press != "" && !p.pressed && p.answers >= 1 {
		p.pressed = true
		for _, k := range p.opts.press {
			if err := p.c.SendDTMF(ctx, string(k)); err != nil {
				return err
			}
		}
		p.logf("pressed %s", p.opts.press)
	}
	return nil
}

func (p *phone) onMessage(m caller.Message, now time.Time) {
	switch m.Kind {
	case caller.Media:
		start := p.playedUntil
		if start.Before(now) {
			start = now
		}
		p.playedUntil = start.Add(mulawDuration(len(m.Audio)))
		p.played = append(p.played, m.Audio...)
	case caller.Mark:
		due := p.playedUntil
		if due.Before(now) {
			due = now
		}
		p.marks = append(p.marks, mark{name: m.Name, due: due, end: len(p.played)})
	case caller.Clear:
		// Twilio drops what it has not played and returns the marks
		// still waiting at once.
		unplayed := 0
		if p.playedUntil.After(now) {
			unplayed = int(p.playedUntil.Sub(now).Seconds() * audio.CarrierRate)
		}
		unplayed = min(unplayed, len(p.played)-p.answerEnd)
		p.played = p.played[:len(p.played)-unplayed]
		p.playedUntil = now
		p.logf("barge-in: the gateway cleared %.2f s of audio not yet played", mulawDuration(unplayed).Seconds())
		for i := range p.marks {
			p.marks[i].due, p.marks[i].end = now, min(p.marks[i].end, len(p.played))
		}
	}
}

// markPlayed echoes the first waiting mark: the answer before it has been
// heard.
func (p *phone) markPlayed(ctx context.Context) error {
	m := p.marks[0]
	p.marks = p.marks[1:]
	if err := p.c.SendMark(ctx, m.name); err != nil {
		return err
	}
	p.answers++
	p.logf("answer %d: %.2f s of audio, played to its mark %q", p.answers, mulawDuration(m.end-p.answerEnd).Seconds(), m.name)
	p.answerEnd = m.end
	return nil
}

func (p *phone) hangUp() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = p.c.Hangup(ctx)
}

func (p *phone) logf(format string, args ...any) {
	fmt.Fprintf(p.w, "[%6.2fs] %s\n", clock.Wall.Since(p.started).Seconds(), fmt.Sprintf(format, args...))
}

// writeAnswer writes what the caller heard as 8 kHz PCM16.
func (p *phone) writeAnswer(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := writeWAV(f, audio.CarrierRate, audio.AppendPCM(nil, p.played)); err != nil {
		_ = f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	fmt.Fprintf(p.w, "wrote %s: %.2f s heard (8 kHz PCM16)\n", path, mulawDuration(len(p.played)).Seconds())
	return nil
}

// mulawDuration is how long n bytes of μ-law at 8 kHz play.
func mulawDuration(n int) time.Duration {
	return time.Duration(n) * time.Second / audio.CarrierRate
}
