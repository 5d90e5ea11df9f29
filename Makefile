# ichido — the two commands: `make run` and `make test`. Everything else is a helper.
SHELL := /bin/bash
LISTEN ?= 127.0.0.1:7878
DATA ?= ./ichido-data
# In CI (CI=true) warnings are errors.
CMAKE_FLAGS := $(if $(CI),-DICHIDO_WERROR=ON,)

.PHONY: all deps build run test bench bench-counters fuzz format clean

all: build

deps:
	@scripts/install-deps

build: deps
	@cmake --preset release $(CMAKE_FLAGS) >/dev/null
	@cmake --build build

run: build
	build/ichido serve --listen $(LISTEN) --data $(DATA)

test: build
	ctest --test-dir build --output-on-failure --timeout 600

# Issue 6: ichido vs Redis, PostgreSQL and etcd in one run (~15 min; installs the peers).
bench:
	bench/compare

# The quick counters-only benchmark (~1 min).
bench-counters: build
	bench/run

clean:
	rm -rf build build-debug
