package cli

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/turnstile-gw/turnstile/audio"
)

// A WAV `gateway call` writes reads back as the same sound, and a file
// with chunks before its data (as editors write them) reads too.
func TestWAVRoundTripsAndSkipsOtherChunks(t *testing.T) {
	pcm := []byte{1, 0, 2, 0, 0xFF, 0x7F, 0, 0x80}
	var b bytes.Buffer
	if err := writeWAV(&b, 8000, pcm); err != nil {
		t.Fatal(err)
	}
	w, err := readWAV(bytes.NewReader(b.Bytes()))
	if err != nil || w.rate != 8000 || !bytes.Equal(w.pcm, pcm) {
		t.Fatalf("readWAV(writeWAV(...)) = %d Hz %x, %v; want 8000 Hz %x", w.rate, w.pcm, err, pcm)
	}
	// A LIST chunk of odd length (padded) between fmt and data.
	raw := b.Bytes()
	withList := append([]byte(nil), raw[:36]...)
	withList = append(withList, "LIST"...)
	withList = binary.LittleEndian.AppendUint32(withList, 3)
	withList = append(withList, 'a', 'b', 'c', 0)
	withList = append(withList, raw[36:]...)
	if w, err := readWAV(bytes.NewReader(withList)); err != nil || !bytes.Equal(w.pcm, pcm) {
		t.Fatalf("a WAV with a LIST chunk: %x, %v", w.pcm, err)
	}
}

func TestWAVRefusesWhatItCannotPlay(t *testing.T) {
	var stereo bytes.Buffer
	_ = writeWAV(&stereo, 8000, []byte{0, 0})
	b := stereo.Bytes()
	binary.LittleEndian.PutUint16(b[22:], 2) // channels
	for name, tc := range map[string]struct {
		data []byte
		want string
	}{
		"not RIFF": {[]byte("ID3 something else entirely"), "not a WAV"},
		"stereo":   {b, "2 channels"},
		"no data":  {b[:36], "no data chunk"},
	} {
		if _, err := readWAV(bytes.NewReader(tc.data)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: readWAV error %v, want one saying %q", name, err, tc.want)
		}
	}
}

// The caller's audio: the demo utterance by default, or a WAV file at 8 kHz
// as is and at other rates through the anti-aliasing converter.
func TestCallSpeechFromTheDemoUtteranceOrAWAV(t *testing.T) {
	mulaw, what, err := callSpeech("")
	if err != nil || len(mulaw) != int(demoUtterance.Seconds()*audio.CarrierRate) || !strings.Contains(what, "demo utterance") {
		t.Fatalf("demo utterance: %d bytes, %q, %v", len(mulaw), what, err)
	}
	dir := t.TempDir()
	for _, rate := range []int{8000, 16000, 48000} {
		path := filepath.Join(dir, "in.wav")
		f, _ := os.Create(path)
		_ = writeWAV(f, rate, make([]byte, 2*rate)) // 1 s of silence
		_ = f.Close()
		mulaw, _, err := callSpeech(path)
		if err != nil || len(mulaw) < 7999 || len(mulaw) > 8001 {
			t.Errorf("%d Hz WAV: %d μ-law bytes, %v; want 1 s at 8 kHz", rate, len(mulaw), err)
		}
	}
	if _, _, err := callSpeech(filepath.Join(dir, "missing.wav")); err == nil {
		t.Error("a missing file gave no error")
	}
}
