# ichido — the two commands: `make run` and `make test`. Everything else is a helper.
SHELL := /bin/bash
LISTEN ?= 127.0.0.1:7878
DATA ?= ./ichido-data
# In CI (CI=true) warnings are errors.
CMAKE_FLAGS := $(if $(CI),-DICHIDO_WERROR=ON,)

.PHONY: all deps build run test bench fuzz format clean

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

test: build
	ctest --test-dir build --output-on-failure --timeout 600

bench: build
	bench/run

clean:
	rm -rf build build-debug
