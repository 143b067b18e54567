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

from operator import itemgetter
from typing import Any, ClassVar


class Event(tuple):
    """Context common to every ftrace line.

    Events are immutable tuples with named fields (like typing.NamedTuple, but with
    inheritance: a class's fields are its bases' then its own annotations), compared
    and hashed with their class.  A tuple is built in one call, much faster than a frozen
    dataclass with slots for sched_switch's 13 fields (timed by hand, not kept), which the
    parser's throughput needs; ``SchedSwitch(cpu=..., ...)`` works as with a dataclass.
    """

    __slots__ = ()
    NAME: ClassVar[str] = ""
    FIELDS: ClassVar[tuple[str, ...]] = ()  # in order: the tuple's items
    FIELD_TYPES: ClassVar[dict[str, str]] = {}  # name -> its annotation ('int', 'str', ...)

    cpu: int  # the CPU whose ring buffer held the event (where the tracepoint fired)
    ts: float  # seconds (the trace clock's value; 'local'/'global'/'mono' clocks are seconds)
    comm: str  # the current task's comm (ftrace's saved cmdline; '<...>' when unknown)
    pid: int  # the current task's pid (0 = idle)
    tgid: int | None  # from the optional '(  tgid)' column; None when absent or '-------'
    flags: str  # the irq-info column ('d..2.'), '' when the trace has irq-info off

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        if kwargs:
            given = dict(zip(cls.FIELDS, args, strict=False))
            for k, v in kwargs.items():
                if k not in cls.FIELDS or k in given:
                    raise TypeError(f"{cls.__name__}() got an unexpected or repeated argument {k!r}")
                given[k] = v
            missing = [f for f in cls.FIELDS if f not in given]
            if missing:
                raise TypeError(f"{cls.__name__}() missing arguments: {', '.join(missing)}")
            args = tuple(given[f] for f in cls.FIELDS)
        if len(args) != len(cls.FIELDS):
            raise TypeError(f"{cls.__name__}() takes {len(cls.FIELDS)} fields ({len(args)} given)")
        return tuple.__new__(cls, args)

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        _name_fields(cls)

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash((type(self).__name__, tuple(self)))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in zip(self.FIELDS, self, strict=True))})"

    def __getnewargs__(self) -> tuple[Any, ...]:
        return tuple(self)

    @property
    def name(self) -> str:
        return self.NAME

    def to_dict(self) -> dict[str, Any]:
        d = dict(zip(self.FIELDS, self, strict=True))
        d["event"] = self.name
        return d


def _name_fields(cls: type[Event]) -> None:  # (defined after Event: called for it below)
    """Give *cls* its FIELDS (the bases' first, then its own non-ClassVar annotations)
    and a read-only property per field."""
    names: list[str] = []
    types: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        for k, t in vars(klass).get("__annotations__", {}).items():
            t = str(t)
            if t.startswith(("ClassVar", "typing.ClassVar")) or k in types:
                continue
            names.append(k)
            types[k] = t
    cls.FIELDS, cls.FIELD_TYPES = tuple(names), types
    for i, k in enumerate(names):
        if not isinstance(vars(cls).get(k), property):
            setattr(cls, k, property(itemgetter(i), doc=f"field {i}: {k}"))


_name_fields(Event)


class SchedWakeup(Event):
    """sched_wakeup: 'comm=%s pid=%d prio=%d target_cpu=%03d'.

    In 6.1 this fires in ttwu_do_wakeup(), which may run on the *target* CPU
    when the wakeup was queued there (ttwu_queue_wakelist), so ``cpu`` is not
    always the waker's CPU; sched_waking always fires in the waker's context.
    """

    __slots__ = ()
    NAME: ClassVar[str] = "sched_wakeup"

    task_comm: str
    task_pid: int
    prio: int
    target_cpu: int


class SchedWaking(SchedWakeup):
    """sched_waking: same format as sched_wakeup, always in the waker's context."""

    __slots__ = ()
    NAME: ClassVar[str] = "sched_waking"


class SchedWakeupNew(SchedWakeup):
    """sched_wakeup_new: a new task's first placement; ``cpu`` is the forking parent's CPU."""

    __slots__ = ()
    NAME: ClassVar[str] = "sched_wakeup_new"


class SchedSwitch(Event):
    """sched_switch: 'prev_comm=%s prev_pid=%d prev_prio=%d prev_state=%s%s ==> next_comm=%s ...'."""

    __slots__ = ()
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


class SchedMigrateTask(Event):
    """sched_migrate_task: 'comm=%s pid=%d prio=%d orig_cpu=%d dest_cpu=%d'."""

    __slots__ = ()
    NAME: ClassVar[str] = "sched_migrate_task"

    task_comm: str
    task_pid: int
    prio: int
    orig_cpu: int
    dest_cpu: int


class SchedMoveNuma(Event):
    """sched_move_numa: 'pid=%d tgid=%d ngid=%d src_cpu=%d src_nid=%d dst_cpu=%d dst_nid=%d'.

    NUMA balancing moved a task to its preferred node (migrate_task_to()).
    """

    __slots__ = ()
    NAME: ClassVar[str] = "sched_move_numa"

    task_pid: int
    task_tgid: int
    ngid: int
    src_cpu: int
    src_nid: int
    dst_cpu: int
    dst_nid: int


class SchedNumaPair(Event):
    """The sched_numa_pair_template: 'src_pid=%d src_tgid=%d src_ngid=%d src_cpu=%d
    src_nid=%d dst_pid=%d dst_tgid=%d dst_ngid=%d dst_cpu=%d dst_nid=%d'.

    ``dst_pid`` is 0 when there was no task on the other side; ``dst_cpu`` and
    ``dst_nid`` are -1 when no destination CPU was found (stick).
    """

    __slots__ = ()
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


class SchedSwapNuma(SchedNumaPair):
    """sched_swap_numa: NUMA balancing swapped two tasks between nodes."""

    __slots__ = ()
    NAME: ClassVar[str] = "sched_swap_numa"


class SchedStickNuma(SchedNumaPair):
    """sched_stick_numa: NUMA balancing wanted to move a task but left it where it was.

    Older kernels defined sched_stick_numa with the sched_move_numa format
    ('pid= tgid= ngid= src_cpu= ...'); the parser maps that form onto this
    class with src_* from the task and dst_pid/dst_tgid/dst_ngid = 0.
    """

    __slots__ = ()
    NAME: ClassVar[str] = "sched_stick_numa"


class SchedProcessFork(Event):
    """sched_process_fork: 'comm=%s pid=%d child_comm=%s child_pid=%d'."""

    __slots__ = ()
    NAME: ClassVar[str] = "sched_process_fork"

    parent_comm: str
    parent_pid: int
    child_comm: str
    child_pid: int


class SchedProcessExit(Event):
    """sched_process_exit: 'comm=%s pid=%d prio=%d'."""

    __slots__ = ()
    NAME: ClassVar[str] = "sched_process_exit"

    task_comm: str
    task_pid: int
    prio: int


class GenericEvent(Event):
    """Any other event (or a known one whose body did not match its format)."""

    __slots__ = ()
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


def fast_constructor(cls: type[Event]):  # noqa: ANN201 - returns a function
    """A positional constructor for *cls* (the parser's Python path): the fields in
    FIELDS order, unchecked, as one tuple.__new__ call."""
    new = tuple.__new__

    def make(*args: Any) -> Event:
        return new(cls, args)

    return make
