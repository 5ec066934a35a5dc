# Turnstile — see README.md. `make run` serves the gateway with the offline
# demo model and an embedded Redis; `make test` runs the whole suite.
GO       ?= go
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT   ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS  := -s -w -X github.com/turnstile-gw/turnstile/gateway.version=$(VERSION) -X github.com/turnstile-gw/turnstile/gateway.commit=$(COMMIT)
STATICCHECK_VERSION := v0.8.2

.PHONY: test-voice-goroutines run test test-under-load test-js test-js-sdk test-deps lint build release docker clean

run:
	$(GO) run -ldflags "$(LDFLAGS)" ./cmd/gateway

# The suite needs a real redis-server (integration tests); test-deps installs
# it when it is missing.
test: test-deps
	$(GO) test -race -count=1 -timeout 30m ./...

# The gateway's voice tests with voice sessions served by a goroutine per
# socket (TURNSTILE_VOICE_LOOP=false: the way of a model connection through
# an https proxy, and of every session off Linux); CI runs them after make test,
# which runs them on event loops (the default).
test-voice-goroutines: test-deps
	TURNSTILE_TEST_VOICE_LOOP=false $(GO) test -race -count=1 -timeout 30m -run 'Voice|Audio|Mic|Barge|Relay|Speech|Live' ./gateway/

# The whole suite beside two busy-looping processes: a busy CI machine
# (docs/testing.md).
test-under-load: test-deps
	scripts/test-under-load

# The official JS SDK (@google/genai) against cmd/fakegemini; needs Node.js
# 20+ and npm (test-deps installs them). CI runs it after `make test`.
test-js-sdk: test-deps
	scripts/test-js-sdk

test-deps:
	@scripts/install-test-deps

# The browser client package: npm ci, tsc --noEmit, node --test.
test-js: test-deps
	@scripts/test-js

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: files above need formatting"; exit 1; }
	$(GO) vet ./...
	GOOS=windows $(GO) vet ./... # the unix-only halves (internal/wsbuf's lean reads) and their tests stay behind build tags
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/gateway ./cmd/gateway
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/fakegemini ./cmd/fakegemini
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/fakeopenai ./cmd/fakeopenai

# The artefacts of a release in dist/: static gateway binaries for linux and
# darwin (amd64, arm64), the browser client's npm tarball, SHA256SUMS. For
# VERSION=vX.Y.Z if given, else the version tag at HEAD (scripts/release).
release:
	scripts/release $(if $(filter command line environment,$(origin VERSION)),$(VERSION),$(shell git describe --tags --exact-match 2>/dev/null))

docker:
	docker build --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) -t turnstile:$(VERSION) .

clean:
	rm -rf bin dist
