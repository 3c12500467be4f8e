#!/usr/bin/env bash
# Makes sure a Rust toolchain new enough for Monty 1.4 (rustc and cargo 1.96 or newer) is
# installed: the one on PATH, else Debian's rustc-web/cargo-web in /usr/bin, installed with
# apt-get (sudo when not root) when neither is there. `--clippy` also wants a matching clippy
# (Debian's rust-web-clippy: clippy 1.95 cannot check crates that need 1.96's std).
# Used by `make demo`/`make build`/`make wheel` (the `toolchain` target) and by .ci/run.
# Elsewhere than Debian/Ubuntu it stops with a pointer to rustup.
set -euo pipefail
new_enough() { "$1" --version 2>/dev/null | grep -Eq ' 1\.(9[6-9]|[1-9][0-9]{2,})\.'; }
clippy=0
if [ "${1:-}" = "--clippy" ]; then clippy=1; fi
if new_enough rustc && new_enough cargo && { [ $clippy = 0 ] || cargo clippy --version >/dev/null 2>&1; }; then
  exit 0
fi
packages=()
if ! new_enough /usr/bin/rustc || ! new_enough /usr/bin/cargo; then packages+=(rustc-web cargo-web); fi
if [ $clippy = 1 ] && [ ! -x /usr/bin/cargo-clippy ]; then packages+=(rust-web-clippy); fi
if [ ${#packages[@]} = 0 ]; then exit 0; fi
if ! command -v apt-get >/dev/null; then
  echo "codeact needs Rust 1.96 or newer (rustc, cargo) to build its extension: https://rustup.rs" >&2
  exit 1
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
echo "installing ${packages[*]} (Rust 1.96 for Monty 1.4) with apt-get" >&2
$SUDO apt-get update -q
$SUDO apt-get install -y -q "${packages[@]}"
