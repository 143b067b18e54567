"""Typed scheduler trace events, one frozen dataclass per tracepoint.

Every event carries the ftrace line's context: the CPU whose buffer it came
from (``cpu``), the timestamp in seconds (``ts``) and the task that was
*current* when the tracepoint fired (``comm``, ``pid``, and ``tgid`` when the
trace had the ``record-tgid`` option).  The task an event is *about* (the
wakee, the migrated task, ...) is a separate per-event field, because the two
differ: a ``sched_wakeup_new`` line's current task is the parent doing the
fork, while ``task_pid`` is the child being placed.

Field names follow the kernel's TP_printk keys (include/trace/events/sched.h in
6.1), except that the subject task's ``comm=``/``pid=`` become
``task_comm``/``task_pid`` so they cannot be confused with the context's.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, ClassVar


@dataclass(frozen=True, slots=True)
class Event:
    """Context common to every ftrace line."""

    NAME: ClassVar[str] = ""

    cpu: int  # the CPU whose ring buffer held the event (where the tracepoint fired)
    ts: float  # seconds (the trace clock's value; 'local'/'global'/'mono' clocks are seconds)
    comm: str  # the current task's comm (ftrace's saved cmdline; '<...>' when unknown)
    pid: int  # the current task's pid (0 = idle)
    tgid: int | None  # from the optional '(  tgid)' column; None when absent or '-------'
    flags: str  # the irq-info column ('d..2.'), '' when the trace has irq-info off

    @property
    def name(self) -> str:
        return self.NAME

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["event"] = self.name
        return d


@dataclass(frozen=True, slots=True)
class SchedWakeup(Event):
    """sched_wakeup: 'comm=%s pid=%d prio=%d target_cpu=%03d'.

    In 6.1 this fires in ttwu_do_wakeup(), which may run on the *target* CPU
    when the wakeup was queued there (ttwu_queue_wakelist), so ``cpu`` is not
    always the waker's CPU; sched_waking always fires in the waker's context.
    """

    NAME: ClassVar[str] = "sched_wakeup"

    task_comm: str
    task_pid: int
    prio: int
    target_cpu: int


@dataclass(frozen=True, slots=True)
class SchedWaking(SchedWakeup):
    """sched_waking: same format as sched_wakeup, always in the waker's context."""

    NAME: ClassVar[str] = "sched_waking"


@dataclass(frozen=True, slots=True)
class SchedWakeupNew(SchedWakeup):
    """sched_wakeup_new: a new task's first placement; ``cpu`` is the forking parent's CPU."""

    NAME: ClassVar[str] = "sched_wakeup_new"


@dataclass(frozen=True, slots=True)
class SchedSwitch(Event):
    """sched_switch: 'prev_comm=%s prev_pid=%d prev_prio=%d prev_state=%s%s ==> next_comm=%s ...'."""

    NAME: ClassVar[str] = "sched_switch"

    prev_comm: str
    prev_pid: int
    prev_prio: int
    prev_state: str  # 'R', 'R+', 'S', 'D', 'D|K', 'I', ... as printed
    next_comm: str
    next_pid: int
    next_prio: int

    @property
    def preempted(self) -> bool:
        """The previous task was still runnable (prev_state 'R' or 'R+')."""
        return self.prev_state.startswith("R")


@dataclass(frozen=True, slots=True)
class SchedMigrateTask(Event):
    """sched_migrate_task: 'comm=%s pid=%d prio=%d orig_cpu=%d dest_cpu=%d'."""

    NAME: ClassVar[str] = "sched_migrate_task"

    task_comm: str
    task_pid: int
    prio: int
    orig_cpu: int
    dest_cpu: int


@dataclass(frozen=True, slots=True)
class SchedMoveNuma(Event):
    """sched_move_numa: 'pid=%d tgid=%d ngid=%d src_cpu=%d src_nid=%d dst_cpu=%d dst_nid=%d'.

    NUMA balancing moved a task to its preferred node (migrate_task_to()).
    """

    NAME: ClassVar[str] = "sched_move_numa"

    task_pid: int
    task_tgid: int
    ngid: int
    src_cpu: int
    src_nid: int
    dst_cpu: int
    dst_nid: int


@dataclass(frozen=True, slots=True)
class SchedNumaPair(Event):
    """The sched_numa_pair_template: 'src_pid=%d src_tgid=%d src_ngid=%d src_cpu=%d
    src_nid=%d dst_pid=%d dst_tgid=%d dst_ngid=%d dst_cpu=%d dst_nid=%d'.

    ``dst_pid`` is 0 when there was no task on the other side; ``dst_cpu`` and
    ``dst_nid`` are -1 when no destination CPU was found (stick).
    """

    NAME: ClassVar[str] = ""

    src_pid: int
    src_tgid: int
    src_ngid: int
    src_cpu: int
    src_nid: int
    dst_pid: int
    dst_tgid: int
    dst_ngid: int
    dst_cpu: int
    dst_nid: int


@dataclass(frozen=True, slots=True)
class SchedSwapNuma(SchedNumaPair):
    """sched_swap_numa: NUMA balancing swapped two tasks between nodes."""

    NAME: ClassVar[str] = "sched_swap_numa"


@dataclass(frozen=True, slots=True)
class SchedStickNuma(SchedNumaPair):
    """sched_stick_numa: NUMA balancing wanted to move a task but left it where it was.

    Older kernels defined sched_stick_numa with the sched_move_numa format
    ('pid= tgid= ngid= src_cpu= ...'); the parser maps that form onto this
    class with src_* from the task and dst_pid/dst_tgid/dst_ngid = 0.
    """

    NAME: ClassVar[str] = "sched_stick_numa"


@dataclass(frozen=True, slots=True)
class SchedProcessFork(Event):
    """sched_process_fork: 'comm=%s pid=%d child_comm=%s child_pid=%d'."""

    NAME: ClassVar[str] = "sched_process_fork"

    parent_comm: str
    parent_pid: int
    child_comm: str
    child_pid: int


@dataclass(frozen=True, slots=True)
class SchedProcessExit(Event):
    """sched_process_exit: 'comm=%s pid=%d prio=%d'."""

    NAME: ClassVar[str] = "sched_process_exit"

    task_comm: str
    task_pid: int
    prio: int


@dataclass(frozen=True, slots=True)
class GenericEvent(Event):
    """Any other event (or a known one whose body did not match its format)."""

    event: str
    body: str

    @property
    def name(self) -> str:
        return self.event

    def fields(self) -> dict[str, str]:
        """Best-effort 'key=value' pairs of the body (values are the raw strings)."""
        out: dict[str, str] = {}
        for tok in self.body.split():
            k, sep, v = tok.partition("=")
            if sep:
                out[k] = v
        return out


TYPED_EVENTS: tuple[type[Event], ...] = (
    SchedWakeup,
    SchedWaking,
    SchedWakeupNew,
    SchedSwitch,
    SchedMigrateTask,
    SchedMoveNuma,
    SchedSwapNuma,
    SchedStickNuma,
    SchedProcessFork,
    SchedProcessExit,
)
EVENT_CLASSES: dict[str, type[Event]] = {c.NAME: c for c in TYPED_EVENTS}


def fast_constructor(cls: type[Event]):  # noqa: ANN201 - returns a generated function
    """A positional constructor for *cls* that skips the frozen __init__.

    A frozen dataclass's generated __init__ sets each field through
    ``object.__setattr__`` looked up by name; for a 13-field sched_switch that
    is ~1.8 us, more than parsing the line.  Calling the slot descriptors'
    ``__set__`` directly (bound as defaults, so they are fast locals) halves
    it.  The result is an ordinary, still immutable, instance of *cls*.
    """
    names = [f.name for f in fields(cls)]
    setters = ", ".join(f"_s_{n}=_cls.{n}.__set__" for n in names)
    body = "".join(f"        _s_{n}(o, {n})\n" for n in names)
    src = (
        "def outer(_cls):\n"
        f"    def make({', '.join(names)}, *, _new=object.__new__, _cls=_cls, {setters}):\n"
        "        o = _new(_cls)\n"
        f"{body}"
        "        return o\n"
        "    return make\n"
    )
    ns: dict[str, Any] = {}
    exec(src, ns)  # noqa: S102 - generated from dataclass field names only
    return ns["outer"](cls)
