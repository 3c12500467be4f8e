# The one developer interface. CI (.ci/run) calls the same targets.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= $(HOME)/.cache/codeact/venv
export CARGO_TARGET_DIR ?= $(HOME)/.cache/codeact/target
BIN := $(VENV)/bin
# Monty 1.4 needs rustc 1.96. `make toolchain` (tools/ensure_rust.sh) installs Debian's
# rustc-web/cargo-web into /usr/bin when no new-enough toolchain is there; on this kind of machine
# rustup's older proxies come first on PATH, so /usr/bin goes first when its rustc is new enough
# (evaluated at each use, after `toolchain` ran). clippy must be 1.96 too (rust-web-clippy).
RUST_PATH = $(shell /usr/bin/rustc --version 2>/dev/null | grep -Eq ' 1\.(9[6-9]|[1-9][0-9]{2,})\.' && echo /usr/bin:)$(PATH)
# The patched crates (rust/patched/<crate>-1.4.0-<digest>) and .cargo/config.toml's [patch] entries.
PATCHED := .cargo/config.toml
# Cargo profiles (Cargo.toml): fat-LTO `release` for the release wheel, `dev-release` for
# development builds and the demo (several times faster to build from cold).
DEV_PROFILE ?= dev-release
# Cargo features of the extension: `make build FEATURES=type-check` adds the ty-based type check
# of scripts' tool calls (off by default: it roughly doubles a cold build; docs/type-check.md).
FEATURES ?=
CARGO_FEATURES = $(if $(FEATURES),--features $(FEATURES))
DEMO_DIR ?= $(HOME)/.cache/codeact/demo
# Extras installed for development and tests: every integration is tested against the real library.
EXTRAS ?= test,openai,pydantic-ai,mcp,langchain,adk,otel,cli,postgres,dbos,web,test-web

.PHONY: test-quick forged-snapshots instructions scale-out-scenario toolchain patch install build wheel sdist install-wheel format lint test test-rust benchmark benchmark-quick benchmark-latency benchmark-load demo example sdist-check fuzz load property stress loom docs docs-check all clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q "maturin[zig]>=1.9,<2" "uv>=0.5"

# Byte-compile what is installed and let Python cache compiled modules (and pytest its rewritten
# tests): with PYTHONDONTWRITEBYTECODE set every process recompiles the dependencies it imports,
# and each test process and child process pays it again (collection 13 s instead of 4 s).
export UV_COMPILE_BYTECODE := 1
unexport PYTHONDONTWRITEBYTECODE

# uv installs the extras (parallel downloads; a venv made before uv was added gets it here).
UV = $(BIN)/uv --version >/dev/null 2>&1 || $(BIN)/pip install -q "uv>=0.5"

toolchain:  ## Rust 1.96 (the one on PATH, else Debian's rustc-web/cargo-web, installed when missing)
	bash tools/ensure_rust.sh

install: build  ## editable install with the test tools into $(VENV) (for development)

$(PATCHED): build_backend/codeact_build/monty_patch.py $(wildcard rust/patches/*.patch)
	PATH=$(RUST_PATH) $(PYTHON) tools/patch_monty.py
	touch $@

# pip and python -m build prepare it by themselves (build_backend/); plain cargo builds and maturin need it.
patch: $(PATCHED)  ## prepare the patched monty-types and monty crates (rust/patched/, .cargo/config.toml; ADR 0003)

build: toolchain $(BIN)/python $(PATCHED)  ## build the extension (dev-release profile) and install the package editable into $(VENV)
	$(UV)
	PATH=$(RUST_PATH) VIRTUAL_ENV=$(VENV) $(BIN)/maturin develop --uv --profile $(DEV_PROFILE) $(CARGO_FEATURES) -E $(EXTRAS)

# The release wheel is portable: zig links it against glibc 2.17 (manylinux2014), so it installs on
# RHEL/Rocky 8, Amazon Linux 2023, Debian 11, Ubuntu 20.04 and newer. The release workflow runs the same.
WHEEL_COMPAT ?= manylinux2014
wheel: toolchain $(BIN)/python $(PATCHED)  ## build the release wheel (fat LTO, manylinux2014 via zig) into dist/
	rm -f dist/codeact-*.whl
	$(BIN)/python -c "import ziglang" 2>/dev/null || $(BIN)/pip install -q "ziglang>=0.13"
	PATH=$(BIN):$(RUST_PATH) $(BIN)/maturin build --release --zig --compatibility $(WHEEL_COMPAT) $(CARGO_FEATURES) --out dist

sdist: $(BIN)/python $(PATCHED)  ## build the sdist into dist/ (sources and patches, not Monty's source)
	rm -f dist/codeact-*.tar.gz
	PATH=$(RUST_PATH) $(BIN)/maturin sdist --out dist

format:
	$(BIN)/ruff format python tests examples benchmarks tools fuzz
	$(BIN)/ruff check --fix python tests examples benchmarks tools fuzz
	cargo fmt --all

lint: toolchain $(PATCHED)
	$(BIN)/ruff format --check python tests examples benchmarks tools fuzz
	$(BIN)/ruff check python tests examples benchmarks tools fuzz
	$(BIN)/lint-imports --no-cache  # the layers of the package ([tool.importlinter] in pyproject.toml)
	$(BIN)/mypy python/codeact  # the type gate ([tool.mypy]: runtime/ and sessions/ as strict)
	$(BIN)/python tools/check_docstrings.py  # every public name documented
	cargo fmt --all -- --check
	PATH=$(RUST_PATH) cargo clippy --workspace --all-targets -- -D warnings
	$(BIN)/python -m mypy.stubtest codeact._monty --allowlist .ci/stubtest-allowlist.txt

test-rust: toolchain $(PATCHED)
	PATH=$(RUST_PATH) cargo test --workspace --release

install-wheel: wheel  ## install the freshly built wheel (with test extras) into $(VENV)
	$(UV)
	$(BIN)/uv pip install -q --python $(BIN)/python --reinstall-package codeact "$$(ls dist/codeact-*.whl)[$(EXTRAS)]"

# The suite runs in parallel (pytest-xdist, PYTEST_WORKERS processes, all cores by default), then
# the timing-sensitive tests (marked `serial`) one at a time. `make test` tests the development
# build `make demo` made (no second compile); `make test RELEASE=1` the release wheel (what CI runs).
PYTEST_WORKERS ?= auto
PYTEST_ARGS ?=
TESTS ?= tests
ifeq ($(RELEASE),1)
TEST_INSTALL := install-wheel
else
TEST_INSTALL := build
endif
# Two passes, both always run; the target fails if either fails. Exit code 5 (no test selected,
# e.g. TESTS or PYTEST_ARGS pick no serial test) counts as a pass.
PYTEST = PATH=$(RUST_PATH) $(BIN)/python -m pytest -q
define two_passes
	$(PYTEST) -n $(PYTEST_WORKERS) -m "$(1)not serial" $(2) $(PYTEST_ARGS) $(TESTS); parallel=$$?; \
	  $(PYTEST) -m "$(1)serial" $(3) $(PYTEST_ARGS) $(TESTS); serial=$$?; \
	  for rc in $$parallel $$serial; do [ $$rc -eq 0 ] || [ $$rc -eq 5 ] || exit $$rc; done
endef
test: $(TEST_INSTALL)  ## the whole suite, in parallel then the serial group (RELEASE=1: against the release wheel; TESTS=, PYTEST_ARGS= narrow it)
	$(call two_passes,,,)

test-quick: build  ## the inner loop: every test not marked slow (parallel, then the serial ones), with a coverage report of python/codeact
	$(call two_passes,not slow and ,--cov=codeact --cov-report=,--cov=codeact --cov-append --cov-report=term)

# The quick start: toolchain if missing, a dev-release build installed editable (no extras needed).
demo: toolchain $(BIN)/python $(PATCHED)  ## the offline demo agent, both phases: it suspends for approval, then resumes
	PATH=$(RUST_PATH) VIRTUAL_ENV=$(VENV) $(BIN)/maturin develop --profile $(DEV_PROFILE)
	rm -rf $(DEMO_DIR) && mkdir -p $(DEMO_DIR)
	cd $(DEMO_DIR) && $(BIN)/python $(CURDIR)/examples/codeact_monty_agent/main.py
	cd $(DEMO_DIR) && $(BIN)/python $(CURDIR)/examples/codeact_monty_agent/main.py --approve

sdist-check:  ## build the sdist from a clean clone and install it into a fresh venv (dev-release; reuses the target folder), then run the runtime example
	rm -rf /tmp/codeact-sdist-check && git clone -q . /tmp/codeact-sdist-check/clone
	$(PYTHON) -m venv /tmp/codeact-sdist-check/venv
	/tmp/codeact-sdist-check/venv/bin/pip install -q --upgrade pip build
	cd /tmp/codeact-sdist-check/clone && /tmp/codeact-sdist-check/venv/bin/python -m build --sdist --outdir ../dist
	PATH=$(RUST_PATH) MATURIN_PEP517_ARGS="--profile $(DEV_PROFILE)" /tmp/codeact-sdist-check/venv/bin/pip install -q /tmp/codeact-sdist-check/dist/codeact-*.tar.gz
	cd /tmp && /tmp/codeact-sdist-check/venv/bin/python $(CURDIR)/examples/runtime_steps/main.py

example: install-wheel  ## the runtime example: one script composing two tools, step by step
	$(BIN)/python examples/runtime_steps/main.py

benchmark: install-wheel  ## the benchmarks, full length
	PATH=$(RUST_PATH) $(BIN)/python benchmarks/runtime.py
	$(BIN)/python benchmarks/round_trip.py
	$(BIN)/python benchmarks/agent.py
	$(BIN)/python benchmarks/isolation.py
	$(BIN)/python benchmarks/integrations.py
	PATH=$(RUST_PATH) $(BIN)/python benchmarks/namespace.py
	$(BIN)/python benchmarks/hostile.py
	$(BIN)/python benchmarks/stores.py
	$(BIN)/python benchmarks/scale_out.py

benchmark-latency: install-wheel  ## time to the first visible token and to the answer (eager start), codeact beside its peers (each peer's venv created from PyPI on first use)
	$(BIN)/python benchmarks/latency.py

benchmark-load: install-wheel  ## 1, 16 and 128 sessions at once: calls/s and CPU per call, codeact beside smolagents CodeAgent (its venv created from PyPI on first use)
	$(BIN)/python benchmarks/load.py

instructions: install-wheel  ## instruction counts (callgrind) of start and the tool round trip beside the bare crate
	PATH=$(RUST_PATH) $(BIN)/python benchmarks/instructions.py

benchmark-quick: install-wheel  ## the benchmarks in smoke mode (CI)
	PATH=$(RUST_PATH) $(BIN)/python benchmarks/runtime.py --quick
	$(BIN)/python benchmarks/round_trip.py --rounds 3 --runs 5
	$(BIN)/python benchmarks/agent.py --quick
	$(BIN)/python benchmarks/integrations.py --quick
	PATH=$(RUST_PATH) $(BIN)/python benchmarks/namespace.py --quick
	$(BIN)/python benchmarks/hostile.py --quick
	$(BIN)/python benchmarks/stores.py --quick
	$(BIN)/python benchmarks/scale_out.py --quick
	$(BIN)/python benchmarks/latency.py --smoke   # peers only where their venv exists: never installs
	$(BIN)/python benchmarks/load.py --quick      # ~15 s; the peer only where its venv exists

FUZZ_SECONDS ?= 600
FUZZ_EXAMPLES ?= 20000
fuzz: install-wheel  ## bounded fuzzing campaign: hypothesis properties at FUZZ_EXAMPLES each, then atheris for FUZZ_SECONDS
	CODEACT_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/python -m pytest -q tests/test_fuzz_native.py
	mkdir -p $(HOME)/.cache/codeact/fuzz-corpus && cp -n fuzz/corpus/* $(HOME)/.cache/codeact/fuzz-corpus/
	$(BIN)/python fuzz/atheris_harness.py $(HOME)/.cache/codeact/fuzz-corpus -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=4096 -artifact_prefix=$(HOME)/.cache/codeact/

FORGED_PROCESSES ?= 30
FORGED_COUNT ?= 3000
forged-snapshots: install-wheel  ## how often forged unsigned snapshots crash the host in process (docs/security.md): FORGED_PROCESSES children x FORGED_COUNT forgeries
	$(BIN)/python fuzz/forged_snapshots.py --processes $(FORGED_PROCESSES) --count $(FORGED_COUNT)

STRESS_STEPS ?= 2000000
STRESS_THREADS ?= 4
property: install-wheel  ## the approvals decision-path property test at length (PROPERTY_EXAMPLES, default 1000)
	CODEACT_PROPERTY_EXAMPLES=$(or $(PROPERTY_EXAMPLES),1000) $(BIN)/python -m pytest -q -s tests/test_approvals_property.py

stress: install-wheel  ## the step hand-off under contention for STRESS_STEPS round trips (default two million)
	CODEACT_STRESS_STEPS=$(STRESS_STEPS) CODEACT_STRESS_THREADS=$(STRESS_THREADS) $(BIN)/python -m pytest -q tests/test_step_race.py

LOOM_MAX_PREEMPTIONS ?= 3
# Run from outside the checkout: cargo reads .cargo/config.toml from the working directory up, and
# the checkout's [patch] entries (the Monty crates, which loom-step does not use) would change its lock.
loom:  ## loom model check of the step hand-off (rust/src/slot.rs compiled under tools/loom-step; its own crate and lock)
	cd $(HOME) && PATH=$(RUST_PATH) RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=$(LOOM_MAX_PREEMPTIONS) \
		CARGO_TARGET_DIR=$(HOME)/.cache/codeact/target-loom cargo test --release --locked \
		--manifest-path $(CURDIR)/tools/loom-step/Cargo.toml -- --nocapture --test-threads=1

SCENARIO_RUNS ?= 20
scale-out-scenario: install-wheel  ## the DBOS multi-process scenario SCENARIO_RUNS times in a row (tests/test_dbos.py; needs PostgreSQL's initdb); CI runs it once
	for i in $$(seq 1 $(SCENARIO_RUNS)); do \
	  $(BIN)/python -m pytest -q -p no:cacheprovider tests/test_dbos.py -k scenario | tail -n 1 || exit 1; \
	done

LOAD_SESSIONS ?= 1000
load: install-wheel  ## full-size load and isolation run: LOAD_SESSIONS concurrent sessions, figures printed
	CODEACT_LOAD_SESSIONS=$(LOAD_SESSIONS) $(BIN)/python -m pytest -q -s tests/test_load.py

docs: install-wheel  ## the documentation site (mkdocs-material + mkdocstrings), built strictly into site/
	$(BIN)/pip install -q "$$(ls dist/codeact-*.whl)[docs]"
	$(BIN)/python docs/plots.py
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

docs-check:  ## docs/configuration.md's option tables match the fields' descriptions (tools/gen_configuration.py)
	$(BIN)/python tools/gen_configuration.py --check

all: lint test

clean:
	rm -rf dist build .pytest_cache site rust/patched .cargo/config.toml
