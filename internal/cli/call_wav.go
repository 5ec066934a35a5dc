package cli

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// wavFile is a PCM16 mono WAV's sound: what `gateway call` plays and
// writes. A RIFF WAVE file is a header and chunks; only fmt and data
// matter here, so a reader of forty lines does (other chunks are skipped).
type wavFile struct {
	rate int
	pcm  []byte // PCM16LE mono
}

// maxWAV bounds a file `gateway call` reads: ten minutes at 48 kHz.
const maxWAV = 10 * 60 * 48000 * 2

func readWAV(r io.Reader) (wavFile, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxWAV+1024))
	if err != nil {
		return wavFile{}, err
	}
	if len(b) < 12 || string(b[0:4]) != "RIFF" || string(b[8:12]) != "WAVE" {
		return wavFile{}, errors.New("not a WAV file (no RIFF WAVE header)")
	}
	var w wavFile
	var format, channels, bits uint16
	sawFmt := false
	for rest := b[12:]; len(rest) >= 8; {
		id, size := string(rest[0:4]), int(binary.LittleEndian.Uint32(rest[4:8]))
		rest = rest[8:]
		if size > len(rest) {
			size = len(rest) // a truncated last chunk: take what is there
		}
		body := rest[:size]
		switch id {
		case "fmt ":
			if size < 16 {
				return wavFile{}, errors.New("WAV fmt chunk too short")
			}
			format, channels = binary.LittleEndian.Uint16(body[0:]), binary.LittleEndian.Uint16(body[2:])
			w.rate = int(binary.LittleEndian.Uint32(body[4:]))
			bits = binary.LittleEndian.Uint16(body[14:])
			sawFmt = true
		case "data":
			if !sawFmt {
				return wavFile{}, errors.New("WAV data before its fmt chunk")
			}
			if format != 1 || channels != 1 || bits != 16 {
				return wavFile{}, fmt.Errorf("WAV is format %d, %d channels, %d bits; want PCM (1), mono, 16 bits "+
					"(convert with: sox in.wav -c 1 -b 16 out.wav)", format, channels, bits)
			}
			w.pcm = body[:size&^1]
			return w, nil
		}
		rest = rest[min(len(rest), size+size%2):] // chunks are padded to even sizes
	}
	return wavFile{}, errors.New("WAV file has no data chunk")
}

// writeWAV writes PCM16LE mono at rate as a canonical 44-byte-header WAV.
func writeWAV(w io.Writer, rate int, pcm []byte) error {
	var h bytes.Buffer
	le := func(v any) { _ = binary.Write(&h, binary.LittleEndian, v) }
	h.WriteString("RIFF")
	le(uint32(36 + len(pcm)))
	h.WriteString("WAVEfmt ")
	le(uint32(16))
	le(uint16(1)) // PCM
	le(uint16(1)) // mono
	le(uint32(rate))
	le(uint32(rate * 2)) // bytes per second
	le(uint16(2))        // block align
	le(uint16(16))       // bits per sample
	h.WriteString("data")
	le(uint32(len(pcm)))
	if _, err := w.Write(h.Bytes()); err != nil {
		return err
	}
	_, err := w.Write(pcm)
	return err
}

// ReadWAV reads a PCM16 mono WAV file (the answer `gateway call -answer`
// writes): its samples and their rate.
func ReadWAV(r io.Reader) (pcm []byte, rate int, err error) {
	w, err := readWAV(r)
	return w.pcm, w.rate, err
}
