# drover — see README.md. `make help` lists the targets.
GO        ?= go
OUT       ?= out
RECIPE    ?= recipes/ecs-node.yaml
BIN       := bin
# drover's version in its manifests, SBOMs and provenance: the commit, +dirty
# when git status lists any change. Stamped only when both git commands
# succeed: outside a checkout, or when git fails (not installed, a checkout
# it refuses), it is empty and drover falls back to its build info, then to
# "dev" with its source state "unknown", which drover build --release
# refuses. -ldflags and -buildvcs on the command line override any GOFLAGS,
# so the stamp is this one whatever the environment says. -buildvcs=false:
# the stamp is the version; VCS stamping would fail the build in a checkout
# git refuses instead of leaving the version unknown.
VERSION   ?= $(shell c=$$(git rev-parse --verify -q HEAD 2>/dev/null) && s=$$(git status --porcelain 2>/dev/null) && { test -z "$$s" && echo $$c || echo $$c+dirty; })
GOFLAGS_BUILD := -trimpath -buildvcs=false -ldflags="-s -w -X main.version=$(VERSION)"
# The test tiers run through gotestsum (pinned as a tool in go.mod): the
# same output as go test, then every failed test's own output again at the
# end, where a CI log's tail shows it. The JSON events stay in $(OUT).
GOTESTSUM = mkdir -p $(OUT) && $(GO) tool gotestsum --jsonfile $(OUT)/$@-tests.json

.PHONY: help image host-tools test unit integration e2e bench fuzz fuzz-short lint build clean demo smoke smoke-matrix smoke-arm64 mutate conformance

help: ## List the targets and what they do
	@awk 'BEGIN{FS=":.*## "} /^[a-z0-9-]+:.*## /{printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## Build drover, drover-agent and drover-init into bin/
	CGO_ENABLED=0 $(GO) build $(GOFLAGS_BUILD) -o $(BIN)/ ./cmd/...

# The build needs Go and network access only: no host packages, no root.
# Whatever boots or checks an image (tests, smoke, demo, bench) first runs
# scripts/host-setup.sh, which installs the test tools (as root) or names
# the missing ones.
image: build ## Build the default recipe (RECIPE=recipes/ecs-node.yaml) into out/; needs Go only, no root
	$(BIN)/drover build $(RECIPE) -o $(OUT)

host-tools:
	./scripts/host-setup.sh

test: host-tools ## Everything: lint, unit, integration (root, network), fuzz-short and QEMU tests; prints each tier's wall time
	./scripts/test-tiers.sh lint unit integration fuzz-short e2e

lint: ## gofmt, go vet, and go.mod tidy (go mod tidy -diff prints what it would change)
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { gofmt -l .; echo "gofmt needed"; exit 1; }
	$(GO) vet ./...
	$(GO) vet -tags integration ./...
	$(GO) vet -tags e2e ./...
	$(GO) vet -tags vmtest ./agent/...
	@$(GO) mod tidy -diff >/dev/null 2>&1 || { $(GO) mod tidy -diff; echo "go.mod/go.sum are not tidy: run go mod tidy"; exit 1; }

unit: ## Unit tests: no root, no network
	$(GOTESTSUM) --format standard-quiet -- -count=1 ./...

integration: build host-tools ## Integration tests: Debian mirror, Go proxy, root-only tests, host checkers
	$(GOTESTSUM) --format standard-quiet -- -count=1 -tags integration -timeout 40m ./...

e2e: build host-tools ## QEMU end-to-end tests (build, boot, join; the -tags vmtest dm tests in a guest)
	$(GOTESTSUM) --format standard-verbose -- -count=1 -tags e2e -timeout 85m ./e2e/

demo: image host-tools ## Boot out/ecs-node.raw as an ECS instance joining a local control plane (Ctrl-C stops it)
	$(BIN)/drover run --cluster local --fresh $(OUT)/ecs-node.raw

smoke: image host-tools ## The pipeline gate: drover smoke on out/ecs-node.raw with every check (and ten of Kubernetes' [NodeConformance] specs), JUnit in out/
	$(BIN)/drover smoke $(OUT)/ecs-node.raw --reboot --policy-check --conformance --metadata-errors 0.3 --metadata-delay 2s --metadata-token-ttl 1s --junit $(OUT)/smoke.xml

# Kubernetes' own node conformance specs (docs/conformance.md). Not part of
# make test: the full focus runs for hours under TCG. CONFORMANCE_FOCUS (a
# ginkgo regexp) narrows it; the table still counts every [NodeConformance]
# spec, those left out as outside the focus.
conformance: image host-tools ## Kubernetes' [NodeConformance] e2e specs against out/ecs-node.raw as an ECS instance; table, JUnit in out/ (CONFORMANCE_FOCUS= narrows)
	@start=$$(date +%s); \
	$(BIN)/drover conformance $(OUT)/ecs-node.raw --junit $(OUT)/conformance.xml $(if $(CONFORMANCE_FOCUS),--focus '$(CONFORMANCE_FOCUS)'); rc=$$?; \
	echo "conformance: exit $$rc after $$(( $$(date +%s) - start ))s"; exit $$rc

smoke-matrix: build ## Build every per-minor ecs-node recipe, smoke it against a control plane of its minor (and one skew case); print the table
	./scripts/smoke-matrix.sh

smoke-arm64: build host-tools ## Build recipes/ecs-node-arm64.yaml and drover smoke it under qemu-system-aarch64 (TCG); prints the wall time
	@start=$$(date +%s); \
	$(BIN)/drover build recipes/ecs-node-arm64.yaml -o $(OUT) && \
	$(BIN)/drover smoke $(OUT)/ecs-node-arm64.raw --junit $(OUT)/smoke-arm64.xml; rc=$$?; \
	echo "smoke-arm64: exit $$rc after $$(( $$(date +%s) - start ))s"; exit $$rc

fuzz-short: ## Every fuzz target for a few seconds (part of make test)
	./scripts/fuzz.sh 5000x

fuzz: ## Run every fuzz target briefly
	./scripts/fuzz.sh 200000x

mutate: ## Mutation testing (gremlins) of the packages that judge; efficacy per package, target 85% (PKGS=, WORKERS= to narrow); about 2 hours on 2 cores, agent/agent's guard and health files 20 minutes more; the cloud packages apart: PKGS="./publish ./cloud/aliyun ./internal/retry ./rollout" (docs/mutation.md)
	./scripts/mutate.sh

bench: build host-tools ## Benchmarks: resolve/fetch, build, boot; prints the figures the project tracks
	./scripts/bench.sh

clean: ## Remove bin/ and out/ (the download cache is kept)
	rm -rf $(BIN) $(OUT)
