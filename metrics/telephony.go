package metrics

// TelephonyEvent is a phone call event, the event label of
// turnstile_telephony_events_total. A closed set: TelephonyEventNames.
type TelephonyEvent string

const (
	TelephonyWebhook          TelephonyEvent = "webhook"           // a call's webhook answered with a stream
	TelephonyWebhookRefused   TelephonyEvent = "webhook_refused"   // bad or missing carrier signature: HTTP 403
	TelephonyWebhookDraining  TelephonyEvent = "webhook_draining"  // the node is draining: HTTP 503 (the carrier's fallback takes the call)
	TelephonyStreamRefused    TelephonyEvent = "stream_refused"    // a stream upgrade with a bad or missing signature: HTTP 403
	TelephonyStreamBadParams  TelephonyEvent = "stream_bad_params" // start without this gateway's signed call parameters: the stream ends
	TelephonyStreamDuplicate  TelephonyEvent = "stream_duplicate"  // a second stream for a call already streaming: the stream ends
	TelephonyStreamReplayed   TelephonyEvent = "stream_replayed"   // a signed start a stream already used, sent again: the stream ends
	TelephonyStreamBadFrame   TelephonyEvent = "stream_bad_frame"  // a frame that is not the carrier's protocol: the stream ends
	TelephonyDTMFConfirmation TelephonyEvent = "dtmf_confirmation" // a keypad digit answered a confirmation
	TelephonyDTMFText         TelephonyEvent = "dtmf_text"         // a keypad digit reached the model as text
	TelephonyClear            TelephonyEvent = "clear"             // barge-in: the carrier's buffered audio dropped
	TelephonyHangup           TelephonyEvent = "hangup"            // the gateway hung up after the goodbye played
	TelephonyDropped          TelephonyEvent = "dropped"           // the stream ended without the carrier's stop
	TelephonyDrainGoodbye     TelephonyEvent = "drain_goodbye"     // a drain's deadline neared: the model was asked to say goodbye
)

// TelephonyEventNames lists the events.
var TelephonyEventNames = []TelephonyEvent{
	TelephonyWebhook, TelephonyWebhookRefused, TelephonyWebhookDraining, TelephonyStreamRefused,
	TelephonyStreamBadParams, TelephonyStreamDuplicate, TelephonyStreamReplayed, TelephonyStreamBadFrame,
	TelephonyDTMFConfirmation, TelephonyDTMFText, TelephonyClear, TelephonyHangup, TelephonyDropped,
	TelephonyDrainGoodbye,
}

// Carriers are the channels of phone carriers, the carrier label of
// turnstile_telephony_events_total.
var Carriers = []Channel{ChannelTwilio}

// Telephony counts an event of a call of carrier (its Channel).
func (m *Metrics) Telephony(carrier Channel, ev TelephonyEvent) {
	m.TelephonyEvents.WithLabelValues(carrier.String(), string(ev)).Inc()
}
