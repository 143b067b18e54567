"""ftrace text -> typed scheduler events (streaming), with lost-event accounting."""

from .events import (
    EVENT_CLASSES,
    Event,
    GenericEvent,
    SchedMigrateTask,
    SchedMoveNuma,
    SchedNumaPair,
    SchedProcessExit,
    SchedProcessFork,
    SchedStickNuma,
    SchedSwapNuma,
    SchedSwitch,
    SchedWakeup,
    SchedWakeupNew,
    SchedWaking,
)
from .parser import TraceReader, TraceStats, open_trace, parse, parse_file, parse_line

__all__ = [
    "EVENT_CLASSES",
    "Event",
    "GenericEvent",
    "SchedMigrateTask",
    "SchedMoveNuma",
    "SchedNumaPair",
    "SchedProcessExit",
    "SchedProcessFork",
    "SchedStickNuma",
    "SchedSwapNuma",
    "SchedSwitch",
    "SchedWakeup",
    "SchedWakeupNew",
    "SchedWaking",
    "TraceReader",
    "TraceStats",
    "open_trace",
    "parse",
    "parse_file",
    "parse_line",
]
