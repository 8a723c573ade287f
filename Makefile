# tokenprobe. `make help` lists the targets.
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/prometheus/common/version.Version=$(VERSION) \
           -X github.com/prometheus/common/version.Revision=$(shell git rev-parse --short HEAD 2>/dev/null) \
           -X github.com/prometheus/common/version.Branch=$(shell git rev-parse --abbrev-ref HEAD 2>/dev/null)

.PHONY: reliability reliability-soak real-servers screenshots gobench grafana-push dashboards test-deploy deploy-test kube help build run demo-once e2e e2e-busy prometheus3 rules soak manifests test race lint bench fuzz docs clean

help: ## list the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{ n[NR] = $$1; d[NR] = $$2; if (length($$1) > w) w = length($$1) } END { for (i = 1; i <= NR; i++) printf "  %-*s  %s\n", w, n[i], d[i] }'

build: ## build bin/tokenprobe
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/tokenprobe ./cmd/tokenprobe

run: ## the daemon with the demo configuration: http://localhost:9470 (PORT=9471 for another port)
	$(GO) run ./cmd/tokenprobe -c configs/demo.yaml --web.enable-lifecycle $(if $(PORT),--web.listen-address=:$(PORT))

demo-once: ## the demo's baseline and overload profiles once (exit 1 = overload missed its SLO, as intended)
	$(GO) run ./cmd/tokenprobe run -c configs/demo.yaml -p baseline -p overload || test $$? -eq 1

test: ## the test suite, as the README and .ci/run run it (the deploy module: make test-deploy)
	$(GO) test ./...

test-deploy: ## render the Helm chart and decode every object with the Kubernetes API types
	cd deploy && $(GO) test ./...

deploy-test: ## apply every Kubernetes object tokenprobe ships to the cluster KUBECONFIG names (namespaces tokenprobe-test-*, deleted after), read each back and compare it with what was sent (docs/SCALING.md#on-a-real-cluster)
	cd deploy && $(GO) run ./cmd/deploy-test -kubeconfig "$(if $(findstring :,$(KUBECONFIG)),$(KUBECONFIG),$(abspath $(KUBECONFIG)))" $(DEPLOY_TEST_FLAGS)

kube: ## build the test control plane (etcd, kube-apiserver, controller-manager, scheduler, kubectl, kwok, helm) from the Go module proxy: 14 min the first time on two cores (docs/SCALING.md), kept in GOPATH/bin
	tools/kube.sh

race: ## the test suite under the race detector (needs a C compiler)
	GOFLAGS="$(shell $(GO) env GOFLAGS) -race" $(GO) test ./...

lint: ## gofmt, go vet, golangci-lint (.golangci.yml; installed at the pinned version if missing), and a build without cgo
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	@lint=$$($(GO) env GOPATH)/bin/golangci-lint; $$lint version 2>/dev/null | grep -q ' 2\.15\.0 ' || $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0; \
	  $$lint run ./... && (cd deploy && $$lint run --config ../.golangci.yml ./...) && cd tools/bench && $$lint run --config ../../.golangci.yml ./...
	CGO_ENABLED=0 $(GO) build ./...

bench: build ## the benchmark harness: tokenprobe beside a floor client and k6, 100 to 10,000 streams, 10,000 to 50,000 streams in several processes, and the Mooncake trace replays (docs/BENCHMARKS.md: each run says how long it took)
	@command -v k6 >/dev/null || test -x "$$($(GO) env GOPATH)/bin/k6" || { echo "installing k6 v1.8.1 for the side-by-side figures"; $(GO) install go.k6.io/k6@v1.8.1; }
	cd tools/bench && $(GO) build -o ../../bin/tokenprobe-bench ./cmd/tokenprobe-bench
	bin/tokenprobe-bench $(BENCHFLAGS)

gobench: ## Go benchmarks of the hot paths
	$(GO) test -run '^$$' -bench . -benchmem ./probe/... ./internal/sink/... ./exporter/...

fuzz: ## run each fuzz target for FUZZTIME (default 10s)
	for t in FuzzParseChunk:./probe/openai FuzzParseEvents:./probe/openai FuzzReader:./probe/sse FuzzParse:./internal/config \
	         FuzzReadMooncake:./probe/workload FuzzReadSingleTurn:./probe/workload FuzzReadMultiTurn:./probe/workload FuzzResponse:./probe/h1 \
	         FuzzWholeResponse:./probe/client; do \
	  $(GO) test -run '^$$' -fuzz "^$${t%%:*}\$$" -fuzztime $${FUZZTIME:-10s} "$${t#*:}" || exit 1; done

soak: ## the daemon with faults and reloads for SOAK (default 10m); heap, goroutines, files and series must stay flat
	$(GO) test -run Soak -v -timeout 3h ./internal/daemon/ -args -soak.duration=$${SOAK:-10m}

e2e: prometheus3 ## the alert rules in real Prometheus servers (Debian's 2.42 and 3.16) scraping a real daemon
	TOKENPROBE_PROMETHEUS3=$$(tools/prometheus3.sh) $(GO) test -run E2E -v -timeout 5m ./e2e/

e2e-busy: prometheus3 ## the demo daemon beside eight busy loops: QUIET (default 5m) of no page, then an overload pages once
	TOKENPROBE_PROMETHEUS3=$$(tools/prometheus3.sh) $(GO) test -run BusyHost -v -timeout 60m ./e2e/ -e2e.busy -e2e.quiet=$${QUIET:-5m}

real-servers: ## build llama.cpp's llama-server (and a tiny random-weight model) and llm-d-inference-sim into GOPATH/bin, build the gateway one-api, and install Portkey's gateway from npm, once (docs/REAL-SERVERS.md has how long); prints the variables the real-server tests read
	@echo "export TOKENPROBE_LLAMA_SERVER=$$(tools/llamacpp.sh) TOKENPROBE_LLMD_SIM=$$(tools/llmd-sim.sh) TOKENPROBE_PORTKEY=$$(tools/portkey.sh) TOKENPROBE_ONE_API=$$(tools/one-api.sh)"

prometheus3: ## build Prometheus 3.16 from its Go module into GOPATH/bin, once
	tools/prometheus3.sh

rules: ## regenerate alerts/ from the metric catalog
	$(GO) run ./cmd/tokenprobe generate rules --out alerts

dashboards: ## regenerate dashboards/ from the metric catalog
	$(GO) test ./dashboards/gen -run TestCheckedInDashboardsAreGenerated -update

grafana-push: ## post the dashboards to GRAFANA_URL (with GRAFANA_TOKEN, a service account token)
	@test -n "$(GRAFANA_URL)" || { echo "set GRAFANA_URL (and GRAFANA_TOKEN)"; exit 2; }
	for f in dashboards/tokenprobe-*.json; do \
	  printf '{"dashboard":%s,"overwrite":true}' "$$(cat $$f)" | \
	  curl -fsS -X POST -H "Authorization: Bearer $(GRAFANA_TOKEN)" -H 'Content-Type: application/json' \
	    --data-binary @- "$(GRAFANA_URL)/api/dashboards/db" >/dev/null && echo "posted $$f" || exit 1; done

manifests: rules dashboards ## copy the rules and dashboards into the Helm chart and render deploy/kubernetes from it
	cp alerts/tokenprobe-rules.yaml deploy/helm/tokenprobe/files/tokenprobe-rules.yaml
	cp alerts/alertmanagerconfig.yaml deploy/helm/tokenprobe/files/alertmanagerconfig.yaml
	cp dashboards/tokenprobe-*.json deploy/helm/tokenprobe/files/dashboards/
	cd deploy && $(GO) run ./cmd/render

screenshots: ## regenerate docs/img from the current code with headless Chromium
	$(GO) test ./internal/web -run TestScreenshots -screenshots -count=1 -v

reliability: ## measure the daemon's RSS against each hostile mode and write docs/RELIABILITY.md's table
	$(GO) run ./internal/hostile/cmd/rss -write docs/RELIABILITY.md

SOAK_RSS ?= 60m
reliability-soak: ## the token-per-fetch mode for SOAK_RSS (default 60m), RSS at each quarter, into docs/RELIABILITY.md
	$(GO) run ./internal/hostile/cmd/rss -soak $(SOAK_RSS) -write docs/RELIABILITY.md

docs: ## regenerate docs/METRICS.md from the metric catalog (the demo's series counted), the server table of docs/MEASUREMENT.md and docs/AIPERF.md
	$(GO) test ./internal/daemon -run TestDemoSeries -update
	$(GO) test ./internal/catalog -run Docs -update
	$(GO) test ./cmd/tokenprobe -run AIPerfDocs -update
	$(GO) test ./dashboards -run ReadmeCountsTheQueries -update
	$(GO) test ./internal/servermetrics -run Docs -update

clean:
	rm -rf bin artifacts
