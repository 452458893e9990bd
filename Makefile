# distlock's developer entry points. `make test` is the README's test command: it installs what
# the tests need (Debian packages, see .ci/deps) and runs every test.
#
# Release artifacts (see README.md, "Install"; nothing is installed system-wide):
#   make static      the statically linked binary, target/x86_64-unknown-linux-gnu/release/distlock
#   make dist        dist/: the tarball, the .deb and SHA256SUMS (pkg/dist)
#   make image       the container image distlock:VERSION, with docker, podman or buildah (pkg/image)
#   make dist-check  build all of them and test them as CI does (.ci/dist-check; needs root)

TARGET := x86_64-unknown-linux-gnu

.PHONY: test static dist image dist-check
test:
	bash .ci/deps
	cargo test --locked

# glibc linked in (there is no musl target here); --target keeps the flag off proc-macros.
static:
	RUSTFLAGS="-C target-feature=+crt-static" cargo build --release --locked --target $(TARGET)

dist:
	bash pkg/dist

image: static
	bash pkg/image

dist-check:
	bash .ci/dist-check
