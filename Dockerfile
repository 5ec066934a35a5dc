# Multi-stage build: a static gateway binary on a distroless base, run as a
# non-root user. Build with `make docker`, which passes the version (git
# describe) and the commit; see "Versions and releases" in README.md.
FROM golang:1.26.8 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=unknown
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X github.com/turnstile-gw/turnstile/gateway.version=${VERSION} -X github.com/turnstile-gw/turnstile/gateway.commit=${COMMIT}" \
      -o /out/gateway ./cmd/gateway

FROM gcr.io/distroless/static-debian12:nonroot
# Build arguments do not cross stages: declared again for the labels.
ARG VERSION=dev
ARG COMMIT=unknown
ARG SOURCE=https://github.com/turnstile-gw/turnstile
LABEL org.opencontainers.image.title="turnstile-gateway" \
      org.opencontainers.image.description="Realtime voice/text gateway for Gemini" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${COMMIT}" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /out/gateway /gateway
USER nonroot:nonroot
# In a container the gateway must listen beyond loopback, which requires
# TURNSTILE_AUTH_SECRET (dev mode is loopback-only) and model credentials
# (GEMINI_API_KEY, or Vertex AI; TURNSTILE_DEMO=true serves the offline
# demo on purpose).
ENV TURNSTILE_ADDR=0.0.0.0:8080
EXPOSE 8080
ENTRYPOINT ["/gateway"]
