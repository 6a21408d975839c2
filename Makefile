# lockpick: make demo | make test | make bench | one target per scenario.
GO      ?= go
BIN     := bin/lockpick
REV     := $(shell git rev-parse HEAD 2>/dev/null || echo unknown)$(shell git diff --quiet HEAD 2>/dev/null || echo -dirty)
LDFLAGS := -X main.revision=$(REV)
STORE   ?= store
# Extra flags for scenario targets, e.g. make redlock-restart ARGS='--seed 7'
ARGS    ?=
SCENARIOS := single-none single-restart redlock-none redlock-restart redlock-delayed-restart

# The counter workload's figures (issue 4): a client paused past its TTL between reading and writing
# the protected counter. Each target runs bin/lockpick with explicit flags and fails when the exit
# code differs from the expected verdict (0 valid, 1 invalid). COUNTER_TIME sets the fault phase.
COUNTER_TIME ?= 60s
COUNTER := --workload counter --ttl 2s --clients 10 --keys 1 --time-limit $(COUNTER_TIME) --store $(STORE)
PAUSE   := --nemesis client-pause:interval=4s
COUNTER_TARGETS := counter-single-pause counter-fenced-pause counter-redlock-pause counter-redlock-pause-cas counter-fenced-restart
# expect CODE: run the command before it and compare its exit code with CODE.
expect = ; rc=$$?; [ $$rc -eq $(1) ] || { echo "expected exit $(1), got $$rc"; exit 1; }

.PHONY: all build deps test vet bench demo scenarios $(SCENARIOS) $(COUNTER_TARGETS) counter-figures clean

all: build

# Installs what is missing (redis-server, a C compiler) through apt-get when root; otherwise says what to install.
deps:
	@scripts/install-deps.sh

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/lockpick

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { echo "gofmt needed:"; gofmt -l .; exit 1; }

test: deps vet
	$(GO) test -race -count=1 -timeout 14m ./...

# Checker throughput on a generated history of one million operations on one hot key.
bench:
	$(GO) test ./checker -run '^$$' -bench . -benchtime 1x -benchmem

demo: deps build
	@scripts/demo.sh $(BIN) $(STORE)

# Scenario targets: each runs one cell of the expected-outcome table (scenarios/) and fails when the
# verdict differs from the expectation. Pass flags with ARGS, e.g. make redlock-restart ARGS='--seed 7'.
$(SCENARIOS): build
	$(BIN) scenario $@ --store $(STORE) $(ARGS)

scenarios: build
	$(BIN) scenario --store $(STORE) $(ARGS)

# single lock, unguarded resource: the paused client's write lands and loses updates (data invalid).
counter-single-pause: build
	$(BIN) run --lock single --guard none $(PAUSE) $(COUNTER) $(ARGS) $(call expect,1)

# fenced lock, fencing resource: the paused write is rejected; no lost updates, overruns still shown.
counter-fenced-pause: build
	$(BIN) run --lock fenced --guard fencing $(PAUSE) $(COUNTER) $(ARGS) $(call expect,0)

# Redlock, unguarded resource: lost updates, the lock-level check notwithstanding.
counter-redlock-pause: build
	$(BIN) run --lock redlock --guard none $(PAUSE) $(COUNTER) $(ARGS) $(call expect,1)

# Redlock, check-and-set resource: antirez's answer; the paused write finds a changed value.
counter-redlock-pause-cas: build
	$(BIN) run --lock redlock --guard check-and-set $(PAUSE) $(COUNTER) $(ARGS) $(call expect,0)

# fenced lock restarted without persistence: its tokens go backwards and the lock check says so.
counter-fenced-restart: build
	$(BIN) run --lock fenced --guard fencing --nemesis restart:interval=5s --persistence none $(COUNTER) $(ARGS) $(call expect,1)

counter-figures: $(COUNTER_TARGETS)

clean:
	rm -rf bin
