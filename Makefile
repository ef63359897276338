# upscale — build, test and demo on Debian 12.
# `make demo` and `make test` install the Debian packages they need when missing.

PREFIX ?= /usr/local
SWIFT ?= swift
DEB_PACKAGES = pkg-config libsqlite3-dev libavformat-dev libavcodec-dev libavfilter-dev libswscale-dev libswresample-dev libavutil-dev libvips-dev libzimg-dev
# The tests also start a throwaway PostgreSQL cluster (the shared queue's tests) and load
# the dashboard in a headless browser (chromium).
TEST_PACKAGES = postgresql chromium
SUDO = $(shell [ "$$(id -u)" = 0 ] || echo sudo)
SAMPLE = Samples/street.mp4
DEMO_OUT = out

# Installs the Debian packages of $(1) that are not installed yet.
install_missing = missing=""; for p in $(1); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "Installing:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi

.PHONY: all deps test-deps build debug test demo install bench clean

all: build

deps:
	@command -v $(SWIFT) >/dev/null || { echo "error: Swift 6 is not installed; get the Linux toolchain from swift.org and put it on PATH"; exit 1; }
	@$(call install_missing,$(DEB_PACKAGES))

# The Swift runtime and Foundation are linked statically into the release binaries: a
# start then resolves far fewer symbols across shared libraries (measured: `upscale --help`
# 83-95 ms -> 71-89 ms here, before libavfilter was made a run-time load).
build: deps
	$(SWIFT) build -c release --static-swift-stdlib

debug: deps
	$(SWIFT) build

test-deps:
	@$(call install_missing,$(TEST_PACKAGES))

# The suite builds for any x86-64 (the core's portable vector code); the core's tests run
# again built for AVX2 (`-target-cpu haswell`: the paths of processors without AVX-512) and
# for this processor, as release builds are (`-target-cpu native`: here the AVX-512 paths),
# each in its own build folder. UPSCALE_CORE_ONLY makes the manifest the core and its tests
# alone (see Package.swift): those two builds compile nothing else.
test: deps test-deps
	$(SWIFT) test --disable-swift-testing
	if grep -qw avx2 /proc/cpuinfo 2>/dev/null; then \
		UPSCALE_CORE_ONLY=1 $(SWIFT) test --disable-swift-testing --scratch-path .build/haswell -Xswiftc -target-cpu -Xswiftc haswell; \
	else echo "make test: this processor has no AVX2; the core's AVX2 build is not tested here"; fi
	UPSCALE_CORE_ONLY=1 $(SWIFT) test --disable-swift-testing --scratch-path .build/native -Xswiftc -target-cpu -Xswiftc native

demo: build
	@mkdir -p $(DEMO_OUT)
	.build/release/upscale $(SAMPLE) --output $(DEMO_OUT) --overwrite
	@echo "Demo output: $(DEMO_OUT)/street Upscaled.mp4 (2x, H.265, audio copied)"

install: build
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 755 .build/release/upscale .build/release/upscale-bench $(DESTDIR)$(PREFIX)/bin/

bench: build
	.build/release/upscale-bench core

clean:
	rm -rf .build $(DEMO_OUT)
