# The one developer interface. CI (.ci/run) calls the same targets.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= $(HOME)/.cache/codeact/devenv
export CARGO_TARGET_DIR ?= $(HOME)/.cache/codeact/target
BIN := $(VENV)/bin

.PHONY: install build wheel format lint test test-rust benchmark benchmark-quick demo example all clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q "maturin>=1.7,<2"

install: $(BIN)/python  ## editable install with test tools into $(VENV)
	$(BIN)/pip install -q -e ".[test,openai]" --config-settings=build-args="--release" || \
	  (cd . && $(BIN)/maturin develop --release -E test,openai)

build: $(BIN)/python  ## build the extension in place (release)
	$(BIN)/maturin develop --release -E test,openai

wheel: $(BIN)/python  ## build the release wheel into dist/
	rm -f dist/codeact-*.whl
	$(BIN)/maturin build --release --out dist

format:
	$(BIN)/ruff format python tests examples benchmarks
	$(BIN)/ruff check --fix python tests examples benchmarks
	cargo fmt --all

lint:
	$(BIN)/ruff format --check python tests examples benchmarks
	$(BIN)/ruff check python tests examples benchmarks
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings
	$(BIN)/python -m mypy.stubtest codeact._monty --allowlist .ci/stubtest-allowlist.txt

test-rust:
	cargo test --workspace --release

test: wheel  ## build the release wheel once, install it, run the whole test suite against it
	$(BIN)/pip install -q --force-reinstall --no-deps dist/codeact-*.whl
	$(BIN)/pip install -q "$$(ls dist/codeact-*.whl)[test,openai]"
	$(BIN)/python -m pytest -q tests

example: build  ## the runtime example: one script composing two tools
	$(BIN)/python examples/runtime_steps/main.py

benchmark: build
	$(BIN)/python benchmarks/runtime.py

benchmark-quick: build
	$(BIN)/python benchmarks/runtime.py --quick

all: lint test

clean:
	rm -rf dist build .pytest_cache
