# distlock's developer entry points. `make test` is the README's test command: it installs what
# the tests need (Debian packages, see .ci/deps) and runs every test.
#
# Release artifacts (see README.md, "Install"; nothing is installed system-wide):
#   make static      the statically linked binary, target/x86_64-unknown-linux-gnu/release/distlock
#   make dist        dist/: the tarball, the .deb and SHA256SUMS (pkg/dist)
#   make image       the container image distlock:VERSION, with docker, podman or buildah (pkg/image)
#   make dist-check  build all of them and test them as CI does (.ci/dist-check; needs root)
#   make notices     regenerate pkg/notices/crates.txt with cargo-about (after a change to
#                    Cargo.lock; a test says when): the crates' part of THIRD-PARTY-NOTICES

TARGET := x86_64-unknown-linux-gnu
# cargo-about, pinned: another version may word the same notices differently. Installed from
# crates.io into target/ci-tools the first time (a few minutes), never system-wide.
CARGO_ABOUT_VERSION := 0.9.3
CARGO_ABOUT := target/ci-tools/cargo-about-$(CARGO_ABOUT_VERSION)/bin/cargo-about

.PHONY: test static dist image dist-check notices model-check
test:
	bash .ci/deps
	cargo test --locked

# glibc linked in (there is no musl target here); --target keeps the flag off proc-macros.
# THIRD-PARTY-NOTICES goes next to the binary: what it bundles, as built on this machine.
static:
	RUSTFLAGS="-C target-feature=+crt-static" cargo build --release --locked --target $(TARGET)
	bash pkg/notices/assemble target/$(TARGET)/release/THIRD-PARTY-NOTICES

dist:
	bash pkg/dist

image: static
	bash pkg/image

dist-check:
	bash .ci/dist-check

# --frozen: the licence texts come from the crates' sources that cargo fetched for Cargo.lock,
# never from the network, so the same Cargo.lock always gives the same file.
notices:
	test -x $(CARGO_ABOUT) || cargo install --locked --features cli --version $(CARGO_ABOUT_VERSION) \
		--root target/ci-tools/cargo-about-$(CARGO_ABOUT_VERSION) cargo-about
	cargo fetch --locked
	$(CARGO_ABOUT) generate --frozen --fail -c pkg/notices/about.toml \
		-o pkg/notices/crates.txt pkg/notices/crates.hbs

# The model check at its full bounds (docs/verification.md): every configuration, each printing
# its bounds, the states it explored and its time, and the mutants; optimized (profile.model).
model-check:
	cargo test --locked --profile model --lib lock::model::explore -- --include-ignored --nocapture --test-threads 2
