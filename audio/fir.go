package audio

import "math"

// stopbandDB is the attenuation both filters are designed for. μ-law's
// quantisation noise sits about 38 dB under a loud tone, so 65 dB keeps
// aliases and images well below anything a caller or the model could hear.
const stopbandDB = 65

// lowpass designs a linear-phase low-pass FIR by the window method: an
// ideal (sinc) response cut at the middle of the transition band, shaped
// by a Kaiser window for stopbandDB. pass and stop are the band edges in
// Hz at rate; the taps sum to gain. The length is Kaiser's estimate,
// padded with zeros to a multiple of multiple (a polyphase filter's phases
// are then of equal length).
func lowpass(rate, pass, stop, gain float64, multiple int) []float64 {
	width := 2 * math.Pi * (stop - pass) / rate
	n := int(math.Ceil((stopbandDB-7.95)/(2.285*width))) + 1
	if halfBand(rate, pass, stop) {
		// An odd length puts the taps on whole samples from the middle, so
		// every second one falls on a zero of the sinc: a half-band
		// filter, whose middle phase is a plain delay. 4m+3 taps keep the
		// other phase symmetric about a pair of taps.
		n += (3 - n%4 + 4) % 4
	}
	beta := 0.1102 * (stopbandDB - 8.7)
	cutoff := (pass + stop) / 2 / rate // cycles per sample
	h := make([]float64, n)
	mid := float64(n-1) / 2
	sum := 0.0
	for i := range h {
		t := float64(i) - mid
		ideal := 2 * cutoff
		if t != 0 {
			ideal = math.Sin(2*math.Pi*cutoff*t) / (math.Pi * t)
		}
		r := t / mid
		h[i] = ideal * besselI0(beta*math.Sqrt(1-r*r)) / besselI0(beta)
		sum += h[i]
	}
	for i := range h {
		h[i] *= gain / sum
	}
	// Zeros at the end delay nothing and make the phases equally long.
	for len(h)%multiple != 0 {
		h = append(h, 0)
	}
	return h
}

// halfBand reports whether the transition band is centred on a quarter of
// the rate, where the ideal response is 0.5·sinc(t/2).
func halfBand(rate, pass, stop float64) bool { return pass+stop == rate/2 }

// besselI0 is the modified Bessel function of the first kind, order 0, by
// its power series (Kaiser's window needs nothing more precise).
func besselI0(x float64) float64 {
	sum, term := 1.0, 1.0
	for k := 1.0; term > 1e-12*sum; k++ {
		term *= (x / (2 * k)) * (x / (2 * k))
		sum += term
	}
	return sum
}

// polyphase is the read-only part of a rational resampler: the low-pass
// filter split into up phases, each reversed so that a dot product with
// the newest taps input samples (oldest first) gives one output.
type polyphase struct {
	up, down int
	taps     int // the window: input samples a phase may reach back
	phases   []phase
}

// phase is one polyphase branch, trimmed of the zero taps at its ends (a
// half-band filter's middle phase is a single tap: a plain delay) and
// folded when symmetric, so that each output costs only the
// multiplications that matter.
type phase struct {
	off  int       // first window sample it reads
	n    int       // window samples it spans
	coef []float32 // its taps, or the first half of them (and the middle one) when folded
	fold bool
}

// newPolyphase splits h (len a multiple of up) into up phases: output
// sample j of the up-sampled stream is Σ h[p + k·up]·x[j/up − k] with
// p = j mod up, since the up-sampled stream is zero between inputs.
func newPolyphase(h []float64, up, down int) *polyphase {
	k := len(h) / up
	p := &polyphase{up: up, down: down, taps: k, phases: make([]phase, up)}
	for ph := range p.phases {
		c := make([]float32, k)
		for i := range c {
			c[i] = float32(h[ph+(k-1-i)*up])
		}
		p.phases[ph] = newPhase(c)
	}
	return p
}

// negligible is a tap too small to matter: the sinc's zero crossings come
// out of floating point as about 1e-17 rather than 0.
const negligible = 1e-9

func newPhase(c []float32) phase {
	lo, hi := 0, len(c)
	for lo < hi && math.Abs(float64(c[lo])) < negligible {
		lo++
	}
	for hi > lo && math.Abs(float64(c[hi-1])) < negligible {
		hi--
	}
	c = c[lo:hi]
	ph := phase{off: lo, n: len(c), coef: c}
	symmetric := len(c) > 1
	for i := range c {
		symmetric = symmetric && c[i] == c[len(c)-1-i]
	}
	if symmetric {
		ph.coef, ph.fold = c[:(len(c)+1)/2], true
	}
	return ph
}

// apply is the phase's output for the window w (oldest sample first).
func (ph *phase) apply(w []float32) float32 {
	w = w[ph.off : ph.off+ph.n]
	if ph.fold {
		return dotFolded(ph.coef, w)
	}
	return dot(ph.coef, w)
}

// resampler is one stream's filter state over a shared polyphase: the last
// taps input samples, stored twice so that they are always contiguous
// (hist[w:w+taps], oldest first), and where the next output falls.
type resampler struct {
	f    *polyphase
	hist []float32 // 2·taps
	w    int       // next write position, in [0, taps)
	// off is the next output's position on the up-sampled grid, counted
	// from the newest input's; it is due once off < up.
	off int
}

func newResampler(f *polyphase) resampler {
	r := resampler{f: f, hist: make([]float32, 2*f.taps)}
	r.reset()
	return r
}

// reset forgets the stream: silence before the next sample, and the next
// output aligned with it.
func (r *resampler) reset() {
	clear(r.hist)
	r.w = 0
	r.off = r.f.up
}

// push adds one input sample; the outputs it makes due are taken with next.
func (r *resampler) push(x float32) {
	r.hist[r.w] = x
	r.hist[r.w+r.f.taps] = x
	r.w++
	if r.w == r.f.taps {
		r.w = 0
	}
	r.off -= r.f.up
}

// next returns the next output sample that the inputs pushed so far make
// due, or false when it needs more input.
func (r *resampler) next() (float32, bool) {
	if r.off >= r.f.up {
		return 0, false
	}
	y := r.f.phases[r.off].apply(r.hist[r.w : r.w+r.f.taps])
	r.off += r.f.down
	return y, true
}

// dot is Σ a[i]·b[i] over len(a) (b is at least as long), four products
// at a time. The loops re-slice rather than index so that the compiler
// drops the bounds checks.
func dot(a, b []float32) float32 {
	var s0, s1, s2, s3 float32
	for len(a) >= 4 && len(b) >= 4 {
		s0 += a[0] * b[0]
		s1 += a[1] * b[1]
		s2 += a[2] * b[2]
		s3 += a[3] * b[3]
		a, b = a[4:], b[4:]
	}
	for len(a) >= 1 && len(b) >= 1 {
		s0 += a[0] * b[0]
		a, b = a[1:], b[1:]
	}
	return s0 + s1 + s2 + s3
}

// dotFolded is dot(h, b) for the symmetric h of len(b) taps given by its
// first half (and middle, for an odd length):
// Σ half[i]·(b[i] + b[len(b)−1−i]), the middle tap once.
func dotFolded(half, b []float32) float32 {
	pairs := len(b) / 2
	var mid float32
	if len(b)%2 == 1 {
		mid = half[pairs] * b[pairs]
	}
	lo, hi, h := b[:pairs], b[len(b)-pairs:], half[:pairs]
	var s0, s1 float32
	for len(h) >= 2 && len(lo) >= 2 && len(hi) >= 2 {
		s0 += h[0] * (lo[0] + hi[len(hi)-1])
		s1 += h[1] * (lo[1] + hi[len(hi)-2])
		h, lo, hi = h[2:], lo[2:], hi[:len(hi)-2]
	}
	if len(h) >= 1 && len(lo) >= 1 && len(hi) >= 1 {
		s0 += h[0] * (lo[0] + hi[len(hi)-1])
	}
	return s0 + s1 + mid
}
