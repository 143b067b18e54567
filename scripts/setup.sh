#!/bin/sh
# Set up a fresh Debian/Ubuntu machine for lab: system packages, the virtualenv,
# and the default (Debian prebuilt) kernels.  Idempotent; safe to re-run.
set -eu
cd "$(dirname "$0")/.."

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

PKGS="qemu-system-x86 qemu-system-arm qemu-utils busybox-static cpio zstd xz-utils
      python3-venv python3-pip ccache gcc make flex bison bc libelf-dev libssl-dev
      gcc-aarch64-linux-gnu libc6-dev-arm64-cross device-tree-compiler
      linux-perf rt-tests stress-ng numactl kmod file"

missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "setup: installing$missing"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
fi

PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e '.[test]'

# The zero-build default kernel: Debian's prebuilt linux-image, fetched into the cache.
.venv/bin/lab kernel fetch debian
