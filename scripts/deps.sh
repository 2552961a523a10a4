#!/usr/bin/env bash
# Installs what building specdec needs, if missing: a C++20 compiler, CMake and Catch2 (Debian/Ubuntu);
# and, for the fuzzers (scripts/fuzz.sh), clang with libFuzzer.
set -euo pipefail
need=()
command -v g++ >/dev/null || need+=(g++)
command -v cmake >/dev/null || need+=(cmake)
command -v make >/dev/null || need+=(make)
[ -f /usr/include/catch2/catch.hpp ] || [ -f /usr/local/include/catch2/catch.hpp ] ||
  [ -d /usr/include/catch2/internal ] || need+=(catch2)
command -v clang++ >/dev/null || need+=(clang)
compgen -G "/usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a" >/dev/null || need+=(libclang-rt-dev)
if [ ${#need[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "== installing: ${need[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}"
fi
