# vole: build in one stage, run from a small image with git and a non-root user.
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked && strip target/release/vole

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends git curl ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --create-home --home-dir /home/vole --shell /usr/sbin/nologin vole \
 && mkdir /data && chown vole:vole /data
COPY --from=build /src/target/release/vole /usr/local/bin/vole
USER vole
ENV VOLE_LOG=info
VOLUME /data
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=5s CMD curl -fsS http://127.0.0.1:8080/healthz || exit 1
CMD ["vole", "serve", "--listen", "0.0.0.0:8080", "--data", "/data"]
