#!/usr/bin/env bash
# Build sbx as it is released for Linux and print the binary's path: the
# statically linked musl build (.github/workflows/release.yml) when the
# toolchain has its target, else the default glibc build, with a note on
# stderr. The benchmarks measure what users install.
#
#   sbx=$(bench/release-build.sh)     # from the checkout's root
#
# SBX_BENCH_BUILD=glibc measures the glibc build instead (to compare both).
set -euo pipefail
musl=x86_64-unknown-linux-musl
if [ "${SBX_BENCH_BUILD:-}" != glibc ] && [ "$(uname -m)" = x86_64 ] &&
  rustup target list --installed 2>/dev/null | grep -qx "$musl"; then
  cargo build --release --quiet --target "$musl"
  echo "target/$musl/release/sbx"
else
  echo "release-build.sh: measuring the glibc build (the release is static musl)" >&2
  cargo build --release --quiet
  echo "target/release/sbx"
fi
