# Osprey: `make run` serves the default model repository, `make test` runs the whole suite.
SHELL := /bin/bash
SYSTEM_PACKAGES := libuv1-dev libhttp-parser-dev libnghttp2-dev libopenblas-dev libpng-dev libturbojpeg0-dev pkg-config
TEST_PACKAGES := libonnx-testdata prometheus
SWIFT ?= swift
ARGS ?=

.PHONY: run test test-deep test-container build deps test-deps spec clean

## Install missing Debian packages (idempotent, silent when all are present).
deps:
	@.ci/apt-ensure $(SYSTEM_PACKAGES)

test-deps: deps
	@.ci/apt-ensure $(TEST_PACKAGES)

build: deps
	$(SWIFT) build -c release --product osprey

run: build
	.build/release/osprey serve --model-repository models $(ARGS)

# Test servers take a free gRPC port (the default 8081 may be taken on a shared machine).
test test-deep: export OSPREY_GRPC_PORT ?= 0
test: test-deps
	.ci/onnx-newer-tests
	$(SWIFT) build --build-tests
	# Serially: the CPU-bound conformance suites otherwise hold both cooperative threads of a 2-core box and starve the
	# tests that bound a rejection's latency (and the whole run is faster: 47 s against 62 s here).
	$(SWIFT) test --skip-build --no-parallel
	.ci/interop
	.ci/robustness
	.ci/repository-faults
	.ci/deploy-check
	.ci/console

## Long checks, not part of `make test`: schemathesis against openapi.yaml, the fuzzers, swift test under ASan and TSan,
## and the runtime image under podman.
test-deep: test-deps
	.ci/test-deep
	.ci/container-check

## The runtime image built from Debian packages and run under podman (skipped, with the reason, where containers cannot run).
test-container: deps
	.ci/container-check

## Regenerate the embedded copy of openapi.yaml (served at GET /openapi.yaml) after editing the spec.
spec:
	.ci/embed-spec

clean:
	rm -rf .build
