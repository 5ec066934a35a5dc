// Package jsclient embeds the browser client package (@turnstile-gw/client:
// plain ES modules, their type declarations and package.json) so that the
// gateway can serve it at /client/ to its own demo page and to pages on
// other origins. The JavaScript is the package; this file only ships it.
package jsclient

import (
	"embed"
	"io/fs"
)

//go:embed *.js *.d.ts package.json
var files embed.FS

// FS returns the package's files at its root: index.js, the other modules,
// the worklets, index.d.ts, react.d.ts and package.json.
func FS() fs.FS { return files }
