# ichido — the two commands: `make run` and `make test`. Everything else is a helper.
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

.PHONY: all deps build run test soak bench bench-counters fuzz clean install uninstall deb

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

# Builds, then installs build/ichido as $(DESTDIR)$(BINDIR)/ichido (default /usr/local/bin;
# e.g. make install PREFIX=$$HOME/.local), the systemd unit (ExecStart pointing at that binary) and
# /etc/ichido/ichido.conf (kept when it already exists). `make -o build install` installs what is
# built already.
install: build
	install -d "$(DESTDIR)$(BINDIR)"
	install -m 0755 $(INSTALL_STRIP) $(BUILD_DIR)/ichido "$(DESTDIR)$(BINDIR)/ichido"
	install -d "$(DESTDIR)$(PREFIX)/lib/systemd/system"
	sed 's|/usr/bin/ichido|$(BINDIR)/ichido|' deploy/ichido.service > "$(DESTDIR)$(PREFIX)/lib/systemd/system/ichido.service"
	test -e "$(DESTDIR)/etc/ichido/ichido.conf" || install -D -m 0640 deploy/ichido.conf "$(DESTDIR)/etc/ichido/ichido.conf"
	@echo "installed $(DESTDIR)$(BINDIR)/ichido and the systemd unit ichido.service. To run it as a service, as root once:"
	@echo "  useradd --system --user-group --home-dir /var/lib/ichido --shell /usr/sbin/nologin ichido"
	@echo "  systemctl daemon-reload && systemctl enable --now ichido   # admin token: /var/lib/ichido/admin.token"

# Removes the binary and the unit; keeps /etc/ichido/ichido.conf and any data directory.
uninstall:
	rm -f "$(DESTDIR)$(BINDIR)/ichido" "$(DESTDIR)$(PREFIX)/lib/systemd/system/ichido.service"

# Every test: the clang-format check, a short fuzz run of each libFuzzer target (clang, ASan+UBSan), then CTest
# (which includes the dashboard in headless chromium, the packaging checks and the PostgreSQL store's
# tests on a throwaway cluster that CTest starts and removes: scripts/pg-test-cluster; their Debian
# packages are installed first so that a fresh machine's first run does not spend a test's timeout on apt).
test: build
	scripts/install-deps browser deploy postgres
	scripts/check-format
	scripts/fuzz $(FUZZ_SECONDS)
	ICHIDO_CONTRACT_MIN_OPERATIONS=all ctest --test-dir build --output-on-failure --timeout 600

# The fault harness (docs/reliability.md), ~8 min: 300 kill -9 cycles under mixed load, a full
# disk, SIGSTOP longer than the leases, damaged data dirs; every answer checked against the history.
# make soak SOAK_ARGS="--cycles 300 --seed 42" for a longer or repeatable run. (make test runs a
# 3-minute version.)
SOAK_ARGS ?=
soak: build
	scripts/soak $(SOAK_ARGS)

# Longer fuzzing: make fuzz FUZZ_SECONDS=300
fuzz:
	scripts/fuzz $(FUZZ_SECONDS)

# Issue 6: ichido vs Redis, PostgreSQL and etcd in one run (~15 min; installs the peers).
bench:
	bench/run

# The quick counters-only benchmark (~1 min).
bench-counters: build
	bench/counters

# A Debian package (build/ichido_VERSION-1_ARCH.deb) that creates the ichido user and starts the service.
deb: build
	scripts/install-deps deploy
	scripts/make-deb $(BUILD_DIR)

clean:
	rm -rf build build-debug build-fuzz
