# The distlock image: the static binary alone, as the entrypoint, with its licences and the
# notices of what it bundles (THIRD-PARTY-NOTICES: the crates, Rust's standard library, the C
# library) in /usr/share/doc/distlock. Build it with `make image` (docker, podman or buildah,
# whichever is present), which builds the binary and the notices first; by hand:
#   make static && docker build --build-arg VERSION=0.1.0 -t distlock:0.1.0 .
# Copy the binary into an image of your own:
#   COPY --from=distlock:0.1.0 /usr/local/bin/distlock /usr/local/bin/distlock
# The image holds nothing else: no shell for a command to run (`distlock run` is for images
# that have the command; here `status`, `list`, `break`, `acquire`, `renew` and `release` are
# at home), and no CA certificates: for rediss:// give --tls-ca, or mount /etc/ssl/certs.
FROM scratch
ARG VERSION=unknown
COPY target/x86_64-unknown-linux-gnu/release/distlock /usr/local/bin/distlock
COPY LICENSE-MIT LICENSE-APACHE target/x86_64-unknown-linux-gnu/release/THIRD-PARTY-NOTICES /usr/share/doc/distlock/
# Nobody: distlock needs no privilege. (No /etc/passwd here: holders show as "uid 65534".)
USER 65534:65534
ENTRYPOINT ["/usr/local/bin/distlock"]
LABEL org.opencontainers.image.title="distlock" \
      org.opencontainers.image.description="Run a command as a critical section guarded by a Redis lock" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="MIT OR Apache-2.0"
