# Multi-stage build: a static gateway binary on a distroless base, run as a
# non-root user. Build with `make docker`.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=unknown
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT}" \
      -o /out/gateway ./cmd/gateway

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/gateway /gateway
USER nonroot:nonroot
# In a container the gateway must listen beyond loopback, which requires
# TURNSTILE_AUTH_SECRET (dev mode is loopback-only).
ENV TURNSTILE_ADDR=0.0.0.0:8080
EXPOSE 8080
ENTRYPOINT ["/gateway"]
