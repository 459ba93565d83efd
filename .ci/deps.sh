#!/usr/bin/env bash
# Installs the Debian packages zerotrain builds, tests and runs with (idempotent).
set -euo pipefail
PKGS="build-essential clang libclang-rt-14-dev pkg-config
      libopenmpi-dev openmpi-bin libopenblas-openmp-dev libjemalloc-dev libcmocka-dev
      liburing-dev libcjson-dev libxxhash-dev libdnnl-dev libunistring-dev libsentencepiece-dev
      sentencepiece python3 python3-numpy python3-torch python3-mpi4py python3.11-doc fio gnuplot-nox"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
fi
