package fakegemini

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// google.rpc error details, in the JSON form Google's APIs put in the
// "details" array of an error body (proto3 JSON of google.protobuf.Any:
// the "@type" URL, then the message's fields).
const (
	typeErrorInfo    = "type.googleapis.com/google.rpc.ErrorInfo"
	typeRetryInfo    = "type.googleapis.com/google.rpc.RetryInfo"
	typeQuotaFailure = "type.googleapis.com/google.rpc.QuotaFailure"
	typeHelp         = "type.googleapis.com/google.rpc.Help"
)

// ErrorInfo is a google.rpc.ErrorInfo detail: a machine-readable reason
// ("API_KEY_INVALID", "RATE_LIMIT_EXCEEDED", ...) in a domain
// ("googleapis.com"), with optional metadata.
func ErrorInfo(reason, domain string, metadata map[string]string) map[string]any {
	d := map[string]any{"@type": typeErrorInfo, "reason": reason, "domain": domain}
	if len(metadata) > 0 {
		d["metadata"] = metadata
	}
	return d
}

// RetryInfo is a google.rpc.RetryInfo detail: how long to wait before
// retrying, as a protobuf Duration string ("29s", "2.463586755s"), which is
// how the Gemini API says it on 429 (it sends no Retry-After header).
func RetryInfo(delay time.Duration) map[string]any {
	return map[string]any{"@type": typeRetryInfo, "retryDelay": protoDuration(delay)}
}

// RateLimitReply answers 429 RESOURCE_EXHAUSTED the way the Gemini API does
// when a per-minute quota runs out: the message names the metric and says
// when to retry, and the details carry a QuotaFailure, a Help link and a
// RetryInfo with retryDelay.
func RateLimitReply(model string, retryDelay time.Duration) Reply {
	const metric = "generativelanguage.googleapis.com/generate_content_free_tier_requests"
	msg := "You exceeded your current quota, please check your plan and billing details. For more information on " +
		"this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.\n" +
		"* Quota exceeded for metric: " + metric + ", limit: 10, model: " + model + "\n" +
		"Please retry in " + protoDuration(retryDelay) + "."
	return ErrorReply(http.StatusTooManyRequests, "RESOURCE_EXHAUSTED", msg,
		map[string]any{
			"@type": typeQuotaFailure,
			"violations": []any{map[string]any{
				"quotaMetric":     metric,
				"quotaId":         "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
				"quotaDimensions": map[string]any{"location": "global", "model": model},
				"quotaValue":      "10",
			}},
		},
		map[string]any{
			"@type": typeHelp,
			"links": []any{map[string]any{
				"description": "Learn more about Gemini API quotas",
				"url":         "https://ai.google.dev/gemini-api/docs/rate-limits",
			}},
		},
		RetryInfo(retryDelay),
	)
}

// InvalidAPIKeyReply answers 400 INVALID_ARGUMENT with the ErrorInfo
// (reason API_KEY_INVALID) the Gemini API sends for a key it does not know.
func InvalidAPIKeyReply() Reply {
	const msg = "API key not valid. Please pass a valid API key."
	return ErrorReply(http.StatusBadRequest, "INVALID_ARGUMENT", msg,
		ErrorInfo("API_KEY_INVALID", "googleapis.com", map[string]string{"service": "generativelanguage.googleapis.com"}),
		map[string]any{"@type": "type.googleapis.com/google.rpc.LocalizedMessage", "locale": "en-US", "message": msg},
	)
}

// protoDuration formats d as proto3 JSON writes a google.protobuf.Duration:
// seconds with up to nine fractional digits and an "s" ("50s", "0.5s",
// "2.463586755s").
func protoDuration(d time.Duration) string {
	neg := d < 0
	if neg {
		d = -d
	}
	secs, nanos := int64(d/time.Second), int64(d%time.Second)
	s := strconv.FormatInt(secs, 10)
	if nanos != 0 {
		s += strings.TrimRight(fmt.Sprintf(".%09d", nanos), "0")
	}
	if neg {
		s = "-" + s
	}
	return s + "s"
}
