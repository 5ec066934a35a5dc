// Package tools holds everything the gateway knows about tools: manifests
// (a folder per tool with schema.json and guide.md), the registry that loads
// and validates them, argument validation and redaction, provider schema
// renderings, and the response envelope and error types handlers return.
//
// A registry is immutable once loaded and safe for concurrent use.
package tools
