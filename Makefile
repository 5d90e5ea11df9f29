# ichido — the two commands: `make run` and `make test`. `make check` is the everyday subset of
# `make test`; everything else is a helper.
SHELL := /bin/bash
LISTEN ?= 127.0.0.1:7878
DATA ?= ./ichido-data
# In CI (CI=true) warnings are errors.
CMAKE_FLAGS := $(if $(CI),-DICHIDO_WERROR=ON,)
FUZZ_SECONDS ?= 20
# make install: PREFIX, BINDIR and DESTDIR as usual; BUILD_DIR holds the binary (make build makes it).
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
DESTDIR ?=
BUILD_DIR ?= build
# Debug symbols are stripped from the installed copy (build/ichido keeps them); INSTALL_STRIP= keeps them.
INSTALL_STRIP ?= -s

.PHONY: all deps build binary run check test test-image image soak bench bench-counters fuzz clean install uninstall deb

all: build

# Everything: the server, the tools, the tests and the benchmarks, with what they need installed.
deps:
	@scripts/install-deps test

build: deps
	@cmake --preset release -DICHIDO_TESTS=ON -DICHIDO_BENCH=ON $(CMAKE_FLAGS) >/dev/null
	@cmake --build build

# The server alone (build/ichido), with only the packages building and running it needs: a new
# build directory is configured without the tests and benchmarks (make build adds them later).
binary:
	@scripts/install-deps
	@[ -f build/CMakeCache.txt ] || cmake --preset release -DICHIDO_TESTS=OFF -DICHIDO_BENCH=OFF $(CMAKE_FLAGS) >/dev/null
	@cmake --build build --target ichido

run: binary
	@echo "ichido: on first start an admin token is written to $(DATA)/admin.token. Use it with:"
	@echo "  export ICHIDO_TOKEN=\$$(cat $(DATA)/admin.token)"
	@echo "  curl -H \"Authorization: Bearer \$$ICHIDO_TOKEN\" http://$(LISTEN)/v1/ns/demo/counters"
	@echo "ichido: the server keeps this terminal (Ctrl+C stops it): run those in a second one; the command is build/ichido until 'sudo make install'."
	build/ichido serve --listen $(LISTEN) --data $(DATA)

# Installs build/ichido as $(DESTDIR)$(BINDIR)/ichido (default /usr/local/bin; e.g. make install
# PREFIX=$$HOME/.local), the systemd unit (ExecStart pointing at that binary),
# /etc/ichido/ichido.conf (kept when it already exists), and in $(PREFIX)/share/ichido the drop-in
# for ports below 1024 and certbot's deploy hook (README, "Deployment").
# Installs what `make binary` (or `make build`, `make run`) built and never builds: under sudo a
# build would be root's (root-owned files in build/, the packages installed again). Build first as
# yourself.
install:
	@test -x $(BUILD_DIR)/ichido || { echo "make install: $(BUILD_DIR)/ichido is not built: run 'make binary' first (as yourself), then 'sudo make install'" >&2; exit 1; }
	install -d "$(DESTDIR)$(BINDIR)"
	install -m 0755 $(INSTALL_STRIP) $(BUILD_DIR)/ichido "$(DESTDIR)$(BINDIR)/ichido"
	install -d "$(DESTDIR)$(PREFIX)/lib/systemd/system"
	sed 's|/usr/bin/ichido|$(BINDIR)/ichido|' deploy/ichido.service > "$(DESTDIR)$(PREFIX)/lib/systemd/system/ichido.service"
	test -e "$(DESTDIR)/etc/ichido/ichido.conf" || install -D -m 0640 deploy/ichido.conf "$(DESTDIR)/etc/ichido/ichido.conf"
	install -D -m 0644 deploy/bind-low-port.conf "$(DESTDIR)$(PREFIX)/share/ichido/bind-low-port.conf"
	install -D -m 0755 deploy/certbot-deploy-hook "$(DESTDIR)$(PREFIX)/share/ichido/certbot-deploy-hook"
	@echo "installed $(DESTDIR)$(BINDIR)/ichido and the systemd unit ichido.service. To run it as a service, as root once:"
	@echo "  useradd --system --user-group --home-dir /var/lib/ichido --shell /usr/sbin/nologin ichido"
	@echo "  systemctl daemon-reload && systemctl enable --now ichido   # admin token: /var/lib/ichido/admin.token"

# Removes the binary, the unit and $(PREFIX)/share/ichido; keeps /etc/ichido and any data directory.
uninstall:
	rm -f "$(DESTDIR)$(BINDIR)/ichido" "$(DESTDIR)$(PREFIX)/lib/systemd/system/ichido.service"
	rm -rf "$(DESTDIR)$(PREFIX)/share/ichido"

# Tests run side by side (ctest -j): most of them wait on fsync, sockets or child processes, not
# on the CPU. TEST_JOBS=1 runs them one at a time.
TEST_JOBS ?= $(shell n=$$(nproc); echo $$(( n < 2 ? 4 : 2 * n + 2 )))

# The everyday tier (tests labelled `fast`, cmake/test_tiers.cmake): unit tests, the conformance
# suite on the memory and SQLite stores, the SQLite store tests, the integration tests on SQLite
# that are not slow by nature, the OpenAPI lint, the layering fences, clang-format and clang's
# thread-safety analysis. Prints the ten slowest at the end, then why each failed test failed.
# The second trees (the thread-safety check; for make test also the fuzz targets) are built
# before the tests start, not beside them: from nothing they take minutes of both cores, and
# timing-sensitive tests should not share the machine with a compiler. Their tests
# (analysis_thread_safety, fuzz_build) then only check that nothing is left to do, and report a
# failure with its output; the log of the step itself is in build/Testing/.
PREBUILD = mkdir -p build/Testing; for step in $(1); do \
	  echo "make: $$step before the tests (log: build/Testing/$${step//[ \/]/-}.log)"; \
	  $$step >build/Testing/$${step//[ \/]/-}.log 2>&1 || \
	    echo "make: $$step failed; its test reports it"; done

check: build
	@scripts/install-deps analysis format
	@$(call PREBUILD,scripts/analysis)
	@ctest --test-dir build -L '^fast$$' -j $(TEST_JOBS) --timeout 300 --output-on-failure \
	  --output-junit $(CURDIR)/build/Testing/check.xml; status=$$?; \
	  scripts/slowest-tests build/Testing/check.xml; scripts/test-failures build/Testing/check.xml; exit $$status

# Every test: make check's, and the PostgreSQL store's (on a throwaway cluster that CTest starts
# and removes: scripts/pg-test-cluster), several nodes and PostgreSQL failing under them, the
# clients against a live server, the dashboard in headless chromium, the packaging checks, the
# soaks, the benchmark tools and a short fuzz run of each libFuzzer target (clang, ASan+UBSan).
# The Debian packages are installed first so that a fresh machine's first run does not spend a
# test's timeout on apt. Prints the ten slowest at the end, then why each failed test failed.
test: build
	scripts/install-deps browser deploy postgres fuzz analysis format proxy
	@$(call PREBUILD,scripts/analysis "scripts/fuzz build")
	@ICHIDO_CONTRACT_MIN_OPERATIONS=all ICHIDO_FUZZ_SECONDS=$(FUZZ_SECONDS) \
	  ctest --test-dir build -j $(TEST_JOBS) --timeout 600 --output-on-failure \
	  --output-junit $(CURDIR)/build/Testing/test.xml; status=$$?; \
	  scripts/slowest-tests build/Testing/test.xml; scripts/test-failures build/Testing/test.xml; exit $$status

# The fault harness (docs/reliability.md), ~8 min: 300 kill -9 cycles under mixed load, a full
# disk, SIGSTOP longer than the leases, damaged data dirs; every answer checked against the history.
# make soak SOAK_ARGS="--cycles 300 --seed 42" for a longer or repeatable run. (make test runs a
# 3-minute version.)
SOAK_ARGS ?=
soak: build
	scripts/soak $(SOAK_ARGS)

# Longer fuzzing: make fuzz FUZZ_SECONDS=300 (make test runs each target FUZZ_SECONDS, 20 s)
fuzz:
	scripts/fuzz $(FUZZ_SECONDS)

# Issue 6: ichido vs Redis, PostgreSQL and etcd in one run (~15 min; installs the peers).
bench:
	bench/run

# The quick counters-only benchmark (~1 min).
bench-counters: build
	bench/counters

# A Debian package (build/ichido_VERSION-1_ARCH.deb) that creates the ichido user and starts the service.
deb: binary
	scripts/install-deps deploy
	scripts/make-deb $(BUILD_DIR)

# The container image (Containerfile) as $(IMAGE), with podman or docker, whichever is here
# (podman from Debian when neither is); DEBIAN_SUITE=bookworm builds it on Debian 12. Its Debian
# base image comes from a registry as usual; make test-image makes it locally instead
# (tests/image/run). Podman keeps the HEALTHCHECK only in the docker format. Engine options go
# in CONTAINER_ENGINE, e.g. "podman --runtime runc".
IMAGE ?= ichido:latest
DEBIAN_SUITE ?= trixie
CONTAINER_ENGINE ?= $(shell command -v podman >/dev/null 2>&1 && echo podman || (command -v docker >/dev/null 2>&1 && echo docker) || echo podman)
IMAGE_FORMAT = $(if $(filter podman,$(notdir $(firstword $(CONTAINER_ENGINE)))),--format docker,)
image:
	@command -v $(firstword $(CONTAINER_ENGINE)) >/dev/null || scripts/install-deps image
	$(CONTAINER_ENGINE) build $(IMAGE_FORMAT) --build-arg DEBIAN_SUITE=$(DEBIAN_SUITE) -t $(IMAGE) -f Containerfile .

# The image built from scratch and tried (tests/image/run; README, "Deployment", says how long): a Debian base image made with
# mmdebstrap, the image, a container that issues R-0001, a new container on the same volume
# that issues R-0002, SIGTERM, the health check, PostgreSQL mode. Not part of make test.
test-image:
	scripts/install-deps image
	tests/image/run

clean:
	rm -rf build build-debug build-fuzz build-analysis
