#!/bin/sh
# lab's guest agent: /init of the initramfs (busybox sh).
#
# Mounts the pseudo filesystems, finds lab's virtio-serial ports by name, says
# "ready" on lab.log, snapshots the topology the guest kernel built, runs the
# job (/lab/job.sh, appended per run), and streams /tmp/out as a tar archive to
# the lab.out port.  Results never go through the console: the console is only
# for humans and for the host's "guest lost" message.
export PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin
/bin/busybox mkdir -p /proc /sys /dev /tmp /run
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sysfs /sys
/bin/busybox mount -t devtmpfs devtmpfs /dev 2>/dev/null
/bin/busybox --install -s /bin 2>/dev/null
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
[ -d /sys/kernel/tracing/events ] || mount -t tracefs tracefs /sys/kernel/debug/tracing 2>/dev/null
mkdir -p /dev/pts /dev/shm && mount -t devpts devpts /dev/pts 2>/dev/null
mount -t tmpfs tmpfs /dev/shm 2>/dev/null
ln -sf /proc/self/fd /dev/fd 2>/dev/null

[ -f /lab/config ] && . /lab/config

# Drivers the kernel built as modules (Debian's kernel: virtio_pci, virtio_console).
if [ -f /lab/modules ]; then
    while read -r m; do
        [ -n "$m" ] && insmod "/lib/modules/$m" 2>/dev/null
    done < /lab/modules
fi

LOG=/dev/null
OUT=
# The ports' /dev nodes and sysfs names come from the virtio_console probe, which may
# still be running when we get here (and with Debian's kernel, right after insmod).
i=0
[ -f /lab/interactive ] && i=250  # no result ports on an interactive console
# Polled every 20 ms with shell builtins only (no fork per look): the wait is on the
# boot's critical path, and Debian's kernel usually needs one or two looks.
while [ $i -lt 250 ]; do
    for p in /sys/class/virtio-ports/*; do
        [ -f "$p/name" ] || continue
        n=
        read -r n < "$p/name"
        case "$n" in
            lab.log) LOG=/dev/${p##*/} ;;
            lab.out) OUT=/dev/${p##*/} ;;
        esac
    done
    # Both ports: they appear one after the other, so stopping at the first loses the log.
    [ -n "$OUT" ] && [ -c "$OUT" ] && [ "$LOG" != /dev/null ] && [ -c "$LOG" ] && break
    i=$((i + 1))
    sleep 0.02
done

# lab.log is opened once, here, on fd 7, and every later line (this agent's, the job's
# lab_log, steps running at once) is one write() on that descriptor, which children
# inherit.  A virtio-serial port admits one open at a time (virtio_console's
# port_fops_open() returns EBUSY while it is open), so opening it per line lost lines
# whenever two steps logged at once ("can't create /dev/vport0p1: Device or resource busy").
exec 7> "$LOG"
export LAB_LOG_FD=7 LAB_OUT=/tmp/out
say() { echo "lab: $*" >&7; }
up() { cut -d' ' -f1 /proc/uptime; }

# lab booted with maxcpus=N (many vCPUs under TCG: see bringup_mode() in
# lab/render/qemu.py): bring the other CPUs online, in number order as at boot,
# before anything looks at the topology.  Expedited RCU grace periods only while
# onlining (each online waits for some), then the kernel's own setting again.
if grep -q 'maxcpus=' /proc/cmdline; then
    t0=$(cut -d' ' -f1 /proc/uptime)
    exp=$(cat /sys/kernel/rcu_expedited 2>/dev/null)
    [ -n "$exp" ] && echo 1 > /sys/kernel/rcu_expedited
    last=$(sed 's/.*[-,]//' /sys/devices/system/cpu/present)
    i=0
    while [ "$i" -le "$last" ]; do
        f=/sys/devices/system/cpu/cpu$i/online
        if [ -f "$f" ] && [ "$(cat "$f")" = 0 ]; then
            say "onlining cpu=$i uptime=$(up)"  # the host names the CPU a stuck guest stopped at
            echo 1 > "$f"
        fi
        i=$((i + 1))
    done
    [ -n "$exp" ] && echo "$exp" > /sys/kernel/rcu_expedited
    say "online cpus=$(cat /sys/devices/system/cpu/online) from=$t0 uptime=$(up)"
fi

say "ready uptime=$(up)"

finish() {
    say "done rc=$1 uptime=$(up)"
    if [ -n "$OUT" ]; then
        # The host judges nothing on a stream cut short: it compares what reached it
        # with the bytes tar wrote, said on lab.log once they are all sent (counted as
        # they pass, so the results are archived once; tar's own exit status too).
        n=$( { tar -C /tmp/out -cf - .; echo $? > /tmp/tar.rc; } | tee "$OUT" | wc -c)
        say "sent bytes=$((n)) tar=$(cat /tmp/tar.rc 2>/dev/null)"
    fi
    sync
    if [ -n "$OUT" ] && [ "${LAB_HOST_ENDS:-0}" = 1 ]; then
        # libvirt: the last bytes tee wrote may still wait in the port's queue (QEMU
        # holds them while libvirtd's relay is behind), and a reboot now would drop
        # them.  The host ends the VM once every byte has reached it; if it never does,
        # the guest ends itself after 120 s and the host finds the stream short.
        sleep 120
    fi
    reboot -f
    sleep 5
    echo b > /proc/sysrq-trigger
}

if [ -z "$OUT" ] && [ ! -f /lab/interactive ]; then
    echo "lab: no lab.out virtio-serial port (is CONFIG_VIRTIO_CONSOLE built in or loaded?)" > /dev/console
fi

if [ -f /lab/interactive ]; then
    echo "lab: interactive shell; 'reboot -f' ends the VM" > /dev/console
    setsid cttyhack sh -l
    reboot -f
fi

mkdir -p /tmp/out
cd /tmp/out

# The topology the guest kernel built, in the same layout `lab topo capture` writes.
snapshot() {
    dest=$1
    mkdir -p "$dest"
    {
        uname -r
    } > "$dest/uname"
    # From 6.4 the sched-domain debugfs files exist only while sched/verbose is on
    # (34320745dfc9 "sched/debug: Put sched/domains files under the verbose flag");
    # turning it on builds them.  Older kernels have no such file.
    if [ -e /sys/kernel/debug/sched/verbose ] && [ ! -d /sys/kernel/debug/sched/domains/cpu0 ]; then
        echo Y > /sys/kernel/debug/sched/verbose 2>/dev/null
    fi
    # Each sched domain's name, flags and parameters (`lab domains` prints them; spans come
    # from /proc/schedstat).
    grep -H '' /sys/devices/system/cpu/online /sys/devices/system/cpu/possible \
        /sys/devices/system/cpu/cpu[0-9]*/topology/* \
        /sys/devices/system/cpu/cpu[0-9]*/cpu_capacity \
        /sys/devices/system/cpu/cpu[0-9]*/cache/index*/level \
        /sys/devices/system/cpu/cpu[0-9]*/cache/index*/type \
        /sys/devices/system/cpu/cpu[0-9]*/cache/index*/shared_cpu_list \
        /sys/devices/system/cpu/cpu[0-9]*/cache/index*/size \
        /sys/devices/system/node/online /sys/devices/system/node/possible \
        /sys/devices/system/node/node[0-9]*/cpulist \
        /sys/devices/system/node/node[0-9]*/distance \
        /sys/kernel/debug/sched/domains/cpu[0-9]*/domain[0-9]*/name \
        /sys/kernel/debug/sched/domains/cpu[0-9]*/domain[0-9]*/flags \
        /sys/kernel/debug/sched/domains/cpu[0-9]*/domain[0-9]*/imbalance_pct \
        /sys/kernel/debug/sched/domains/cpu[0-9]*/domain[0-9]*/busy_factor \
        /sys/kernel/debug/sched/domains/cpu[0-9]*/domain[0-9]*/cache_nice_tries \
        /sys/kernel/debug/sched/domains/cpu[0-9]*/domain[0-9]*/min_interval \
        /sys/kernel/debug/sched/domains/cpu[0-9]*/domain[0-9]*/max_interval \
        > "$dest/sysfs.txt" 2>/dev/null
    cp /proc/schedstat "$dest/schedstat" 2>/dev/null
    cp /proc/cpuinfo "$dest/cpuinfo" 2>/dev/null
    cp /proc/cmdline "$dest/cmdline" 2>/dev/null
}

if [ "${LAB_SNAPSHOT:-1}" = 1 ]; then
    snapshot /tmp/out/guest
    say "snapshot uptime=$(up)"
fi

# sched_ext: the BPF scheduler lab packed (/lab/sched/bin/$LAB_SCHED), started before
# the job and stopped after it; what happened is in /tmp/out/scheduler/ (status: enabled
# or not-enabled; during: kept or ejected), which the host judges (lab.scheduler.outcome).
# Its arguments are files, one word each (lab.scheduler.guest_files), read back byte for
# byte into "$@": this shell never parses them.
SCHED_DIR=/tmp/out/scheduler
SCHED_PID=
sched_read() { cat "/sys/kernel/sched_ext/$1" 2>/dev/null; }
# The ops name it must show; empty: lab could not read a user's binary's, any will do.
# The scx project's Rust schedulers add their version and target at run time
# (bpfland_1.0.20_x86_64_unknown_linux_gnu), so NAME_anything is NAME too.
sched_ops_ok() {
    [ -z "$LAB_SCHED_OPS" ] || [ "$1" = "$LAB_SCHED_OPS" ] && return 0
    case "$1" in "${LAB_SCHED_OPS}"_*) return 0 ;; esac
    return 1
}
sched_start() {
    mkdir -p "$SCHED_DIR"
    set --
    n=0
    cnt=$(cat /lab/sched/nargs 2>/dev/null)
    while [ "$n" -lt "${cnt:-0}" ]; do
        a=$(cat "/lab/sched/arg.$n"; echo x)
        set -- "$@" "${a%x}"
        n=$((n + 1))
    done
    sched_read enable_seq > "$SCHED_DIR/enable_seq_before"
    say "scheduler start name=$LAB_SCHED uptime=$(up)"
    "/lab/sched/bin/$LAB_SCHED" "$@" > "$SCHED_DIR/output" 2>&1 &
    SCHED_PID=$!
    # Bounded: LAB_SCHED_WAIT seconds, polled every 100 ms; a scheduler that exits
    # (the verifier rejected it) ends the wait at once.
    i=0
    st=
    while [ "$i" -lt $((LAB_SCHED_WAIT * 10)) ]; do
        st=$(sched_read state)
        if [ "$st" = enabled ] && sched_ops_ok "$(sched_read root/ops)"; then
            echo enabled > "$SCHED_DIR/status"
            sched_read enable_seq > "$SCHED_DIR/enable_seq"
            say "scheduler enabled ops=$LAB_SCHED_OPS uptime=$(up)"
            return 0
        fi
        kill -0 "$SCHED_PID" 2>/dev/null || break
        sleep 0.1
        i=$((i + 1))
    done
    echo "${st:-absent}" > "$SCHED_DIR/state"
    echo not-enabled > "$SCHED_DIR/status"
    sched_end
    say "scheduler failed state=${st:-absent} uptime=$(up)"
    return 1
}
# Stop the scheduler: SIGTERM (tools/sched_ext's loaders unregister and exit on it as on
# SIGINT, which a job started with & ignores), then SIGKILL after 10 s; its exit
# status in $SCHED_DIR/exit.
sched_end() {
    if kill -0 "$SCHED_PID" 2>/dev/null; then
        kill -TERM "$SCHED_PID" 2>/dev/null
        j=0
        while kill -0 "$SCHED_PID" 2>/dev/null && [ "$j" -lt 100 ]; do sleep 0.1; j=$((j + 1)); done
        kill -0 "$SCHED_PID" 2>/dev/null && kill -KILL "$SCHED_PID" 2>/dev/null
    fi
    wait "$SCHED_PID"
    echo "$?" > "$SCHED_DIR/exit"
}
sched_stop() {
    st=$(sched_read state)
    ops=$(sched_read root/ops)
    seq=$(sched_read enable_seq)
    echo "$st" > "$SCHED_DIR/state_after"
    # Ejected: the state left enabled, another scheduler took its place (enable_seq
    # moved), or its loader exited (it does when the kernel disables it).
    if [ "$st" = enabled ] && sched_ops_ok "$ops" && [ "$seq" = "$(cat "$SCHED_DIR/enable_seq")" ] \
        && kill -0 "$SCHED_PID" 2>/dev/null; then
        echo kept > "$SCHED_DIR/during"
    else
        echo ejected > "$SCHED_DIR/during"
    fi
    sched_end
    say "scheduler stopped during=$(cat "$SCHED_DIR/during") state=$st uptime=$(up)"
}

rc=0
sched_ok=1
if [ -n "${LAB_SCHED:-}" ]; then
    sched_start || sched_ok=0
fi
if [ -x /lab/job.sh ] && [ "$sched_ok" = 1 ]; then
    say "job start uptime=$(up)"
    /lab/job.sh > /tmp/out/stdout 2> /tmp/out/stderr
    rc=$?
    echo "$rc" > /tmp/out/rc
fi
[ -n "${LAB_SCHED:-}" ] && [ "$sched_ok" = 1 ] && sched_stop
dmesg > /tmp/out/dmesg 2>/dev/null
finish "$rc"
