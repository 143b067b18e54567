#!/bin/sh
# Set up this machine for lab, then run something:
#   scripts/setup.sh            set up only
#   scripts/setup.sh --main     set up, then the main job: lab's seed scenario on the default kernel
#   scripts/setup.sh --test     set up, then lint, type-check and the whole test suite (unit + VM + kernel build)
#   scripts/setup.sh --system   only the system part (apt packages, dpkg's arm64 architecture): the Containerfile's step
#   --yes (before any of these) answers the question below; CI=true does too.
#
# Supported: Debian 12 "bookworm" on amd64 (and what derives from it, VERSION_CODENAME=bookworm).
# lab needs Debian 12's own packages: linux-source-6.1 (the source lab's kernels are built
# from) and linux-image-6.1.0-NN-{amd64,arm64} (the prebuilt default kernel), plus amd64's
# aarch64 cross compiler.  Anywhere else, use the Containerfile (debian:bookworm).
#
# It changes the system only after saying what it will change (the apt packages to
# install, `dpkg --add-architecture arm64`): on a terminal it asks; without one it goes on
# only with --yes or CI=true.  The rest stays in this checkout (.venv, pip) and in lab's
# cache (~/.cache/lab: Debian's kernels and bookworm-backports' QEMU 10, via apt-get
# download with lab's private apt lists).  Idempotent; safe to re-run.
set -eu
cd "$(dirname "$0")/.."

die() { echo "setup: $*" >&2; exit 2; }

YES=""
[ "${CI:-}" = "true" ] && YES=1
ACTION=""
for a in "$@"; do
    case "$a" in
        --yes|-y) YES=1 ;;
        --main|--test|--system) [ -z "$ACTION" ] || die "give one of --main, --test, --system"; ACTION="$a" ;;
        *) die "unknown option $a (use --yes, --main, --test or --system)" ;;
    esac
done

# Which system this is: one line saying why not, when it is not one lab supports.
OS_RELEASE=${LAB_OS_RELEASE:-/etc/os-release}   # (tests name another)
[ -r "$OS_RELEASE" ] || die "cannot tell which system this is (no $OS_RELEASE); lab supports Debian 12 (bookworm) on amd64: use the Containerfile"
# shellcheck disable=SC1090
. "$OS_RELEASE"
if [ "${VERSION_CODENAME:-}" != "bookworm" ] && ! { [ "${ID:-}" = "debian" ] && [ "${VERSION_ID:-}" = "12" ]; }; then
    die "${PRETTY_NAME:-this system} is not supported: lab needs Debian 12 (bookworm) for its packages linux-source-6.1 and linux-image-6.1.0-NN; use the Containerfile (podman build -f Containerfile .)"
fi
HOSTARCH=$(dpkg --print-architecture)
[ "$HOSTARCH" = "amd64" ] || die "Debian 12 on $HOSTARCH is not supported: lab needs amd64 (its aarch64 cross compiler and x86 guests); use an amd64 machine"

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

# clang-16 ... libzstd-dev: sched_ext BPF schedulers (lab scheduler build; the kernel's
# tools/sched_ext wants clang >= 16), linked statically (libelf, zlib, zstd) for the guest's
# busybox initramfs; bpftool only reads a kernel's BTF back (bookworm's 7.1.0 is too old
# for 6.12's skeletons: lab builds the kernel tree's own).
PKGS="qemu-system-x86 qemu-system-arm qemu-utils busybox-static cpio file kmod
      python3 python3-venv python3-pip ccache gcc libc6-dev make flex bison bc
      libelf-dev libssl-dev dwarves gcc-aarch64-linux-gnu libc6-dev-arm64-cross
      device-tree-compiler linux-source-6.1 linux-source-6.12 linux-perf rt-tests stress-ng numactl xz-utils zstd
      git patch chromium fonts-dejavu-core trace-cmd
      libvirt-daemon-system libvirt-dev pkg-config python3-dev
      clang-16 llvm-16 bpftool libbpf-dev libzstd-dev"

missing=""
# The test set only: the remote-libvirt VM test starts its own sshd on a localhost port
# (tests/vm/test_remote_libvirt_vm.py).  Debian's openssh-server package also enables the
# system's own sshd (port 22) where systemd runs, so it is named below before it goes in.
[ "$ACTION" != "--test" ] || PKGS="$PKGS openssh-server openssh-client"
# xmllint: the tests check lab's libvirt domain XML against libvirt 11.3's schemas
[ "$ACTION" != "--test" ] || PKGS="$PKGS libxml2-utils"

for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
# arm64 guests: Debian's arm64 kernel and static busybox are arm64 packages, which apt
# lists only once dpkg knows the architecture.
add_arm64=""
dpkg --print-foreign-architectures | grep -qx arm64 || add_arm64=1

if [ -n "$missing" ] || [ -n "$add_arm64" ]; then
    echo "setup: to set up lab, this changes the system (${SUDO:-as root}):"
    [ -z "$add_arm64" ] || echo "  $SUDO dpkg --add-architecture arm64   (arm64 guests: Debian's arm64 kernel and busybox)"
    echo "  $SUDO apt-get update"
    [ -z "$missing" ] || echo "  $SUDO apt-get install --no-install-recommends$missing"
    case " $missing " in *" openssh-server "*)
        echo "  (openssh-server: for a test's own sshd; Debian's package also starts the system's sshd on port 22 under systemd)" ;;
    esac
    if [ -z "$YES" ]; then
        if [ -t 0 ]; then
            printf "setup: go ahead? [y/N] "
            read -r answer || answer=""
            case "$answer" in y|Y|yes|YES) ;; *) echo "setup: nothing changed" >&2; exit 1 ;; esac
        else
            echo "setup: nothing changed: no terminal to ask on; run again with --yes (or CI=true) to go ahead" >&2
            exit 1
        fi
    fi
    [ -z "$add_arm64" ] || $SUDO dpkg --add-architecture arm64
    $SUDO apt-get update -qq
    if [ -n "$missing" ]; then
        # shellcheck disable=SC2086
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
    fi
fi
[ "$ACTION" != "--system" ] || exit 0

# /dev/kvm as Debian's udev rule leaves it (root:kvm 0660), where no udev ran (a container or
# a microVM): libvirt 9.0 otherwise re-probes QEMU on every domain start ("KVM was enabled
# when probing ..., but it is not available now" to its qemu user), a minute each under TCG.
if [ -c /dev/kvm ] && getent group kvm >/dev/null && [ "$(stat -c %G /dev/kvm)" != kvm ]; then
    $SUDO chgrp kvm /dev/kvm && $SUDO chmod 660 /dev/kvm
fi

PY=python3
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e '.[test]'
# An editable install leaves lab's own modules without bytecode, and where
# PYTHONDONTWRITEBYTECODE is set (it is in some CI and agent shells) Python never writes
# it, so every lab command compiled its ~140 modules again: 0.36 s of each command, e.g.
# of every `lab boot` (bench/bench_bytecode.py, bench/results/bench_bytecode-20261126-141445.json).
# Compiled once here; an edited module's stale bytecode is ignored by Python (mtime check).
.venv/bin/python -m compileall -q lab >/dev/null

# The zero-build default kernel (Debian's prebuilt linux-image), cached under ~/.cache/lab.
.venv/bin/lab kernel fetch debian
.venv/bin/lab kernel fetch debian --arch arm64   # arm64 guests

# QEMU 10 for the machines Debian 12's 7.2 cannot make (x86 above 255 vCPUs, x86 clusters):
# Debian's own prebuilt packages from bookworm-backports into lab's cache (seconds, 23 MB;
# private apt lists, the system's QEMU untouched).  `auto` takes it only where 7.2 cannot.
# The test set needs it (else the jacobsville and QEMU-10 VM tests skip): there a failure
# stops setup; otherwise lab still works on 7.2, so a failure is a note.
if [ "$ACTION" = "--test" ]; then
    # and the same archive's libvirt 11.3 domain schemas (not libvirt itself: the system's
    # stays), which the libvirt rendering tests check lab's domain XML against
    .venv/bin/lab qemu fetch --libvirt-schemas >/dev/null
    # linux-source-6.12 unpacked, and lab-6.12's .config made and checked (57 s on a fresh
    # machine, 19 s when unpacked): the test of the 6.12-line fragments reads that tree,
    # and skipped on a fresh machine without it.
    .venv/bin/lab kernel config lab-6.12 >/dev/null
else
    .venv/bin/lab qemu fetch >/dev/null || echo "setup: no QEMU 10 (above); lab boots on the system's QEMU 7.2, and \`lab qemu build\` builds 10" >&2
fi

case "$ACTION" in
    --main)
        exec .venv/bin/lab run llc-spread-pinned --topology zen3-2s-mini
        ;;
    --test)
        .venv/bin/ruff check lab tests bench scenarios
        .venv/bin/mypy   # files and settings: [tool.mypy] in pyproject.toml
        exec .venv/bin/pytest
        ;;
esac
