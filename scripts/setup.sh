#!/usr/bin/env bash
# Installs the Debian 12 packages engram builds with, only those missing.
# Idempotent; uses sudo when not root.
set -euo pipefail

# Build: compilers, CMake; the libraries engram uses, as they are used.
# Checks: clang + libclang-rt (libFuzzer), abigail-tools (ABI baseline), mandoc (man page lint);
# the throughput harness: redis-server + libhiredis-dev (baseline), gnuplot-nox (plot);
# the reference agents: LibTorch 1.13 (CPU) with OpenBLAS (9-13x faster than
# the reference BLAS it links otherwise); the Debian packages and the test
# under systemd: dpkg-dev, debootstrap, systemd-container (systemd-nspawn);
# the Python binding's tests: Debian's numpy, pytest and PyTorch (engram.torch,
# the PyTorch learner; the CPU build of the LibTorch above); engramd's peers
# (remote/): gRPC 1.51 and protobuf 3.21 (gRPC's CMake config comes with
# libgrpc-dev), openssl for the remote tests' certificates, iproute2 (ip,
# tc) for the tests across network namespaces.
packages=(cmake g++ make pkg-config python3
          libboost-dev libgtest-dev libbenchmark-dev libtomlplusplus-dev libsystemd-dev
          clang libclang-rt-14-dev abigail-tools
          redis-server libhiredis-dev gnuplot-nox liburing-dev libzstd-dev libxxhash-dev
          libtorch-dev libopenblas0-pthread mandoc
          dpkg-dev debootstrap systemd-container
          python3-numpy python3-pytest python3-torch
          libgrpc++-dev libgrpc-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc openssl iproute2)

# Rust: any cargo on PATH (rustup's, or Debian's 1.63 toolchain, installed
# here when there is none).
command -v cargo >/dev/null || packages+=(cargo)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  SUDO="sudo"
fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
