package tools

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxExponent bounds the decimal exponent of a number in canonical
// arguments. JSON itself has no limit, but an exponent this large is never a
// real argument, and the bound keeps the exponent arithmetic in range.
const maxExponent = 1_000_000_000

// CanonicalArgs returns the canonical JSON of a tool's arguments, so that
// two calls with the same arguments compare byte for byte however the model
// spelled them. Its cost is linear in the size of raw.
//
// The canonical form is:
//   - the top-level value is an object; null, empty or all-whitespace input
//     is the empty object {}, and any other non-object is an error;
//   - object keys sorted by their UTF-8 bytes; when a key repeats, the last
//     one wins, as it does for encoding/json (and therefore for handlers);
//   - no whitespace outside strings;
//   - strings escape only what JSON requires: \" and \\, \b \f \n \r \t, other
//     control characters as \u00xx (lower-case hex); everything else is
//     written as UTF-8. Invalid UTF-8 becomes U+FFFD, as encoding/json does;
//   - numbers are exact decimals, never rounded through float64: sign, digits
//     without leading or trailing zeros, and a decimal exponent, written the
//     way JavaScript writes numbers (and RFC 8785 does for doubles): plain
//     digits when the decimal point sits between 21 places left and 6 places
//     right of the digits (100, 0.5, 12345678901234567890, 0.000001), else
//     d.ddde±x (1e+21, 1.5e-7). So 1, 1.0, 1e0 and 10e-1 are all 1, -0 is 0,
//     and integers of any length stay exact. A number whose magnitude is
//     beyond 10^±1e9 is an error.
//
// Input with trailing data after the value is an error.
func CanonicalArgs(raw json.RawMessage) ([]byte, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return []byte("{}"), nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("canonical args: decode: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("canonical args: decode: trailing data after the arguments")
	}
	switch v.(type) {
	case nil:
		return []byte("{}"), nil
	case map[string]any:
	default:
		return nil, fmt.Errorf("canonical args: arguments must be a JSON object, not %s", jsonKind(v))
	}
	var b bytes.Buffer
	b.Grow(len(raw))
	if err := writeCanonical(&b, v); err != nil {
		return nil, fmt.Errorf("canonical args: %w", err)
	}
	return b.Bytes(), nil
}

// ArgsDigest is the hex SHA-256 of canonical arguments: what keys in Redis
// and log lines carry instead of the arguments themselves.
func ArgsDigest(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:])
}

func writeCanonical(b *bytes.Buffer, v any) error {
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case string:
		writeCanonicalString(b, v)
	case json.Number:
		n, err := canonicalNumber(string(v))
		if err != nil {
			return err
		}
		b.WriteString(n)
	case []any:
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeCanonical(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeCanonicalString(b, k)
			b.WriteByte(':')
			if err := writeCanonical(b, v[k]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	default:
		return fmt.Errorf("unexpected decoded type %T", v)
	}
	return nil
}

const hexDigits = "0123456789abcdef"

func writeCanonicalString(b *bytes.Buffer, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				b.WriteString("\uFFFD")
			} else {
				b.WriteString(s[i : i+size])
			}
			i += size
			continue
		}
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if c < 0x20 {
				b.WriteString(`\u00`)
				b.WriteByte(hexDigits[c>>4])
				b.WriteByte(hexDigits[c&0xf])
			} else {
				b.WriteByte(c)
			}
		}
		i++
	}
	b.WriteByte('"')
}

// canonicalNumber rewrites a JSON number literal exactly; see CanonicalArgs
// for the format.
func canonicalNumber(lit string) (string, error) {
	s := lit
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	mant, expPart, hasExp := strings.Cut(strings.ToLower(s), "e")
	intPart, fracPart, _ := strings.Cut(mant, ".")
	if intPart == "" || !allDigits(intPart) || !allDigits(fracPart) {
		return "", fmt.Errorf("invalid number %q", lit)
	}
	exp := 0
	if hasExp {
		e, err := strconv.Atoi(expPart)
		if err != nil || e > 2*maxExponent || e < -2*maxExponent {
			return "", fmt.Errorf("number %q: exponent out of range", lit)
		}
		exp = e
	}
	// value = digits × 10^(exp - len(fracPart))
	digits := strings.TrimLeft(intPart+fracPart, "0")
	if digits == "" {
		return "0", nil
	}
	trimmed := strings.TrimRight(digits, "0")
	exp += len(digits) - len(trimmed) - len(fracPart)
	digits = trimmed
	// Now value = 0.digits × 10^point, JavaScript's (k, n) decomposition.
	k := len(digits)
	point := k + exp
	if point-1 > maxExponent || point-1 < -maxExponent {
		return "", fmt.Errorf("number %q: exponent out of range", lit)
	}
	var out strings.Builder
	if neg {
		out.WriteByte('-')
	}
	switch {
	case k <= point && point <= 21:
		out.WriteString(digits)
		out.WriteString(strings.Repeat("0", point-k))
	case 0 < point && point <= 21:
		out.WriteString(digits[:point])
		out.WriteByte('.')
		out.WriteString(digits[point:])
	case -6 < point && point <= 0:
		out.WriteString("0.")
		out.WriteString(strings.Repeat("0", -point))
		out.WriteString(digits)
	default:
		out.WriteByte(digits[0])
		if k > 1 {
			out.WriteByte('.')
			out.WriteString(digits[1:])
		}
		out.WriteByte('e')
		if point-1 >= 0 {
			out.WriteByte('+')
		}
		out.WriteString(strconv.Itoa(point - 1))
	}
	return out.String(), nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
