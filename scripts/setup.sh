#!/bin/sh
# Set up a fresh Debian/Ubuntu machine for lab, then run something:
#   scripts/setup.sh            set up only
#   scripts/setup.sh --main     set up, then the main job: lab's seed scenario on the default kernel
#   scripts/setup.sh --test     set up, then lint, type-check and the whole test suite (unit + VM + kernel build)
# Idempotent; safe to re-run.  Installs: system packages (apt), the virtualenv
# (.venv, pip), and the default kernel (Debian's prebuilt, via apt-get download).
set -eu
cd "$(dirname "$0")/.."

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

PKGS="qemu-system-x86 qemu-system-arm qemu-utils busybox-static cpio file kmod
      python3 python3-venv python3-pip ccache gcc libc6-dev make flex bison bc
      libelf-dev libssl-dev dwarves gcc-aarch64-linux-gnu libc6-dev-arm64-cross
      device-tree-compiler linux-source-6.1 linux-source-6.12 linux-perf rt-tests stress-ng numactl xz-utils zstd"

missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "setup: installing$missing"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

PY=python3
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e '.[test]'

# The zero-build default kernel (Debian's prebuilt linux-image), cached under ~/.cache/lab.
.venv/bin/lab kernel fetch debian
.venv/bin/lab kernel fetch debian --arch arm64   # arm64 guests (adds the dpkg architecture)

case "${1:-}" in
    --main)
        exec .venv/bin/lab run llc-spread-pinned --topology zen3-2s-mini
        ;;
    --test)
        .venv/bin/ruff check lab tests bench scenarios
        .venv/bin/mypy   # files and settings: [tool.mypy] in pyproject.toml
        exec .venv/bin/pytest
        ;;
    "") ;;
    *)
        echo "setup: unknown option $1 (use --main or --test)" >&2
        exit 2
        ;;
esac
