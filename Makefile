# distlock's developer entry points. `make test` is the README's test command: it installs what
# the tests need (Debian packages, see .ci/deps) and runs every test.

.PHONY: test
test:
	bash .ci/deps
	cargo test --locked
