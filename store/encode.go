package store

import (
	"bytes"
	"encoding/json"
	"sync"
)

// What the store writes to Redis is JSON without HTML escaping: encoding/json's
// Marshal writes each of < > & as a six-byte \u003c escape, which a history of
// markup or code pays for six times over in Redis memory and in the per-user
// storage quota. Nothing reads these values as HTML.

// jsonEncoder encodes values on one reused buffer.
type jsonEncoder struct {
	buf bytes.Buffer
	enc *json.Encoder
}

func newJSONEncoder() *jsonEncoder {
	e := &jsonEncoder{}
	e.enc = json.NewEncoder(&e.buf)
	e.enc.SetEscapeHTML(false)
	return e
}

// encode returns v's JSON; it is valid until the next call.
func (e *jsonEncoder) encode(v any) ([]byte, error) {
	e.buf.Reset()
	if err := e.enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(e.buf.Bytes(), []byte{'\n'}), nil
}

var jsonEncoders = sync.Pool{New: func() any { return newJSONEncoder() }}

// MarshalJSON is json.Marshal without HTML escaping: the encoding of
// everything the store keeps, and so the size the history's byte bounds
// and the user's storage quota count.
func MarshalJSON(v any) ([]byte, error) {
	e := jsonEncoders.Get().(*jsonEncoder)
	defer jsonEncoders.Put(e)
	b, err := e.encode(v)
	if err != nil {
		return nil, err
	}
	return bytes.Clone(b), nil
}
