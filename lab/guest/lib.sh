# lab's guest library, sourced by every scenario job (busybox sh).
#
# Tracing goes through tracefs: per-event enable and filters, a per-CPU buffer
# sized by the host, and after each phase the trace, the per-CPU overrun counts
# and /proc/vmstat + /proc/schedstat before and after land in $LAB_OUT.

LAB_TRACEFS=/sys/kernel/tracing
[ -d $LAB_TRACEFS/events ] || LAB_TRACEFS=/sys/kernel/debug/tracing
LAB_OUT=${LAB_OUT:-/tmp/out}

# One line to the host on the agent's lab.log descriptor (fd 7, opened once by /init:
# never reopen the port, a second open fails with EBUSY while another process holds
# it); busybox's echo writes the line in one write(), so concurrent steps never tear it.
lab_log() { echo "lab: $*" 2>/dev/null >&7; echo "# $*"; }

# lab_trace_setup "sched:sched_switch sched:sched_wakeup ..."  (filters from LAB_FILTER_<event>)
lab_trace_setup() {
    [ -d $LAB_TRACEFS/events ] || { echo "lab: no tracefs (CONFIG_FTRACE?)" >&2; return 1; }
    LAB_TRACE_EVENTS=$1
    echo 0 > $LAB_TRACEFS/tracing_on
    echo nop > $LAB_TRACEFS/current_tracer
    echo 0 > $LAB_TRACEFS/events/enable
    echo "${LAB_TRACE_BUFFER_KB:-4096}" > $LAB_TRACEFS/buffer_size_kb || return 1
    echo > $LAB_TRACEFS/trace
    for e in $1; do
        sys=${e%%:*}
        ev=${e#*:}
        if [ ! -d "$LAB_TRACEFS/events/$sys/$ev" ]; then
            echo "lab: trace event $e not in this kernel" >&2
            return 1
        fi
        eval "f=\${LAB_FILTER_$ev:-}"
        # A filter the kernel refuses would leave the event unfiltered (a flood): refuse.
        if [ -n "$f" ] && ! echo "$f" > "$LAB_TRACEFS/events/$sys/$ev/filter"; then
            echo "lab: the kernel refused the filter for $e: $f" >&2
            return 1
        fi
        echo 1 > "$LAB_TRACEFS/events/$sys/$ev/enable"
    done
}

# lab_trace_on PHASE: snapshot counters, clear the buffer, start tracing.
lab_trace_on() {
    p=${1:-main}
    echo "$p" >> "$LAB_OUT/lab.phases"  # the host expects this phase's files (trace, lost count)
    echo > $LAB_TRACEFS/trace
    cat /proc/vmstat > "$LAB_OUT/vmstat.$p.before"
    cat /proc/schedstat > "$LAB_OUT/schedstat.$p.before"
    cut -d' ' -f1 /proc/uptime > "$LAB_OUT/phase.$p.start"
    echo 1 > $LAB_TRACEFS/tracing_on
}

# lab_trace_off PHASE: stop, snapshot counters, save the trace and the overruns.
lab_trace_off() {
    lab_trace_stop "$@"
    lab_trace_save "$@"
}

# lab_trace_stop PHASE: the phase's end (tracing off, its end time); lab_trace_save PHASE
# then takes the counters after, the overruns and the trace.  Split where work the phase
# traced keeps running until the job stops it: stop, end the work, then save (the counters
# after then include the work's end).  lab_trace_stop forks nothing and reads next to
# nothing: under TCG with every other vCPU busy a fork and exec costs seconds.  Beside
# cpuset-isolation's 18 busy tasks on kunpeng920-2s-mini the old end of a phase (the
# counters and a per-CPU overrun loop, 3 forks a CPU) took most of the run: the cell took
# 265.7 s in bench/results/bench_matrix-20261126-205643.json and 30 s with the split in
# bench/results/bench_matrix-20261127-042600.json.  Reading /proc/schedstat with the
# shell's builtins instead was slow too (a byte a read call, each call formatting the
# file again: seen by hand, not kept).
lab_trace_stop() {
    p=${1:-main}
    echo 0 > $LAB_TRACEFS/tracing_on
    read -r lab_up _ < /proc/uptime
    echo "$lab_up" > "$LAB_OUT/phase.$p.end"
}

lab_trace_save() {
    p=${1:-main}
    cat /proc/vmstat > "$LAB_OUT/vmstat.$p.after"
    cat /proc/schedstat > "$LAB_OUT/schedstat.$p.after"
    lost=0
    for c in $LAB_TRACEFS/per_cpu/cpu*; do
        o=$(awk '/^overrun:/ {print $2} /^dropped events:/ {print $3}' "$c/stats" | awk '{s+=$1} END {print s+0}')
        lost=$((lost + o))
    done
    echo "$lost" > "$LAB_OUT/trace.$p.lost"
    cat $LAB_TRACEFS/trace > "$LAB_OUT/trace.$p.txt"
    lab_trace_raw "$p"
    echo > $LAB_TRACEFS/trace
}

# lab_copy FROM TO: cat FROM > TO without a fork (builtins only; for small files: a read
# builtin takes a byte a call); TO is made even where FROM cannot be read, as cat's
# redirection made it.
lab_copy() {
    : > "$2"
    [ -r "$1" ] || return 0
    while IFS= read -r lab_l || [ -n "$lab_l" ]; do printf '%s\n' "$lab_l"; done < "$1" >> "$2"
}

# lab_trace_raw PHASE: the ring buffers' raw pages and the event formats, from which the
# host assembles trace.dat (lab/trace/tracedat.py).  After the text trace: reading
# trace_pipe_raw consumes the events.  Best effort: the verdict never depends on it.
lab_trace_raw() {
    command -v tracedump > /dev/null 2>&1 || return 0
    d="$LAB_OUT/trace.$1.raw"
    mkdir -p "$d/events" || return 0
    cat $LAB_TRACEFS/events/header_page > "$d/header_page"
    cat $LAB_TRACEFS/events/header_event > "$d/header_event"
    cat $LAB_TRACEFS/saved_cmdlines > "$d/cmdlines" 2> /dev/null
    for e in $LAB_TRACE_EVENTS; do
        mkdir -p "$d/events/${e%%:*}"
        cat "$LAB_TRACEFS/events/${e%%:*}/${e#*:}/format" > "$d/events/${e%%:*}/${e#*:}"
    done
    tracedump $LAB_TRACEFS "$d" > "$d/tracedump.json" 2> "$d/tracedump.err"
}

# lab_run NAME CMD...: run a workload step; its stdout/stderr/rc are kept; a
# non-zero exit is recorded (the host turns it into an ERROR with its stderr).
lab_run() {
    name=$1
    shift
    echo "$name" >> "$LAB_OUT/lab.steps"  # the host expects $name.rc: a step that never ended is not judged
    lab_log "step $name start uptime=$(cut -d' ' -f1 /proc/uptime)"
    "$@" > "$LAB_OUT/$name.out" 2> "$LAB_OUT/$name.err"
    rc=$?
    echo "$rc" > "$LAB_OUT/$name.rc"
    lab_log "step $name rc=$rc uptime=$(cut -d' ' -f1 /proc/uptime)"
    return 0
}

# lab_sysctl PATH VALUE: set a knob and record it (path under /proc/sys or debugfs).
lab_sysctl() {
    if echo "$2" > "$1" 2>/dev/null; then
        echo "$1=$2" >> "$LAB_OUT/knobs"
    else
        echo "$1=FAILED($2)" >> "$LAB_OUT/knobs"
    fi
}

# lab_sysctl_optional PATH VALUE WHY: lab_sysctl for a knob that turns off something the
# kernel may not be built with: no PATH is recorded as "PATH=absent (WHY)", not FAILED
# (lab's tinyconfig kernels have no transparent huge pages, so nothing to turn off).
lab_sysctl_optional() {
    if [ -e "$1" ]; then
        lab_sysctl "$1" "$2"
    else
        echo "$1=absent ($3)" >> "$LAB_OUT/knobs"
    fi
}
