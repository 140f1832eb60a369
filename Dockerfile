# Multi-stage build of both Checkout Lab binaries: the shop and the fake payment gateway.
# Pure Go (the embedded SQLite is a Go translation), so CGO stays off and the result is static.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/shop ./cmd/shop \
 && CGO_ENABLED=0 go build -trimpath -o /out/fakegateway ./cmd/fakegateway

# Alpine rather than distroless: its busybox wget serves the compose health checks.
FROM alpine:3.22
RUN adduser -D -H -u 10001 app && mkdir /data && chown app /data
COPY --from=build /out/shop /out/fakegateway /usr/local/bin/
USER app
ENV DATA_DIR=/data
EXPOSE 8080 8081
CMD ["shop"]
