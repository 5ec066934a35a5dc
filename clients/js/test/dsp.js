// Signal measurements for the audio tests.

/** The amplitude of `freq` in x (sampled at rate) over a window holding a
 * whole number of its cycles: 2/N·|Σ x[n]·e^(−2πi·f·n/rate)|. */
export function tone(x, freq, rate) {
  let re = 0;
  let im = 0;
  for (let n = 0; n < x.length; n++) {
    const ph = (-2 * Math.PI * freq * n) / rate;
    re += x[n] * Math.cos(ph);
    im += x[n] * Math.sin(ph);
  }
  return (2 * Math.hypot(re, im)) / x.length;
}

export function zeroCrossings(x) {
  let n = 0;
  for (let i = 1; i < x.length; i++) if (x[i - 1] < 0 !== x[i] < 0) n++;
  return n;
}
