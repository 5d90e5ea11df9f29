# ichido — the two commands: `make run` and `make test`. Everything else is a helper.
SHELL := /bin/bash
LISTEN ?= 127.0.0.1:7878
DATA ?= ./ichido-data
# In CI (CI=true) warnings are errors.
CMAKE_FLAGS := $(if $(CI),-DICHIDO_WERROR=ON,)
FUZZ_SECONDS ?= 20

.PHONY: all deps build run test bench bench-counters fuzz clean

all: build

deps:
	@scripts/install-deps

build: deps
	@cmake --preset release $(CMAKE_FLAGS) >/dev/null
	@cmake --build build

run: build
	@echo "ichido: on first start an admin token is written to $(DATA)/admin.token. Use it with:"
	@echo "  export ICHIDO_TOKEN=\$$(cat $(DATA)/admin.token)"
	@echo "  curl -H \"Authorization: Bearer \$$ICHIDO_TOKEN\" http://$(LISTEN)/v1/ns/demo/counters"
	build/ichido serve --listen $(LISTEN) --data $(DATA)

# Every test: the clang-format check, a short fuzz run of each libFuzzer target (clang, ASan+UBSan), then CTest
# (which starts and removes its own throwaway PostgreSQL cluster: scripts/pg-test-cluster).
test: build
	@scripts/install-deps postgres
	scripts/check-format
	scripts/fuzz $(FUZZ_SECONDS)
	ctest --test-dir build --output-on-failure --timeout 600

# Longer fuzzing: make fuzz FUZZ_SECONDS=300
fuzz:
	scripts/fuzz $(FUZZ_SECONDS)

# Issue 6: ichido vs Redis, PostgreSQL and etcd in one run (~15 min; installs the peers).
bench:
	bench/run

# The quick counters-only benchmark (~1 min).
bench-counters: build
	bench/counters

clean:
	rm -rf build build-debug build-fuzz
