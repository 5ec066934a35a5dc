package mcp

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// maxName is the longest function name every provider accepts.
const maxName = 64

// safe replaces every character providers do not accept in a function
// name ([a-zA-Z0-9_-]) with '_'.
func safe(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			return r
		}
		return '_'
	}, s)
}

// Prefix is the start of the names of a server's tools: the server's name
// with every character outside [a-zA-Z0-9_-] replaced by '_', and "mcp_"
// in front when it does not start with a letter (Gemini wants a letter or
// '_' first). A name with no letter or digit gives "".
func Prefix(server string) string {
	if strings.IndexFunc(server, func(r rune) bool {
		return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
	}) < 0 {
		return ""
	}
	p := safe(server)
	if c := p[0]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
		p = "mcp_" + p
	}
	return p
}

// Namespace is the gateway's name for a server's tool: prefix + "__" + the
// tool's name made safe ([a-zA-Z0-9_-]). A name longer than 64 characters
// keeps its first 55 and ends with '_' and 8 hex digits of a hash of the
// whole, so that it stays unique and stable.
func Namespace(prefix, tool string) string {
	name := prefix + "__" + safe(tool)
	if len(name) <= maxName {
		return name
	}
	sum := sha256.Sum256([]byte(prefix + "__" + tool))
	return name[:maxName-9] + "_" + hex.EncodeToString(sum[:4])
}
