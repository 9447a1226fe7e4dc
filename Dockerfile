# orchestra's container image: Streamable HTTP at /mcp, bearer tokens required.
#
#   docker build -t orchestra --build-arg VERSION=1.2.0 .
#   docker run -p 8080:8080 -e ORCHESTRA_TOKENS=$(openssl rand -hex 32) -v orchestra-data:/data orchestra
#
# The image's configuration (packaging/container/orchestra.yaml) takes the
# accepted tokens from $ORCHESTRA_TOKENS and keeps the execution records on
# the /data volume. Mount your own at /etc/orchestra/orchestra.yaml to add
# MCP servers or a planner; keep its server.auth, or orchestra refuses the
# non-loopback address. The address is the command's: append
# `serve --http 0.0.0.0:9000` to docker run to move it.

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
# The release build's flags (.goreleaser.yaml); .ci/dist.sh runs this line
# and checks that its binary runs with no libc.
RUN CGO_ENABLED=0 go build -trimpath -tags grpcnotrace -ldflags "-s -w -X github.com/orchestra-mcp/orchestra/internal/version.Version=${VERSION}" -o /out/orchestra .
RUN mkdir /out/data

# Static (no libc), non-root (uid 65532), CA certificates for HTTPS.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/orchestra /usr/local/bin/orchestra
COPY --from=build --chown=65532:65532 /out/data /data
COPY packaging/container/orchestra.yaml /etc/orchestra/orchestra.yaml
ENV ORCHESTRA_CONFIG=/etc/orchestra/orchestra.yaml
USER 65532:65532
VOLUME /data
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/orchestra"]
CMD ["serve", "--http", "0.0.0.0:8080"]
