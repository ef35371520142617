"""The sweep's progress lines on stdout: one when a trial starts, one when it ends (with an ETA)."""

from __future__ import annotations

import sys
import time
from typing import Any, Callable, Dict, Sequence, TextIO

from ddpbench.choices import TrialStatus
from ddpbench.formats.condition import SWEEPER_KEYS, parse_overrides
from ddpbench.trial.summary import NODE_DONE


def _fmt(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def summary_from(result: Any) -> Dict[str, Any]:
    """A job's summary dict; a job that raised becomes a failed one (the sweep goes on)."""
    try:
        summary = result.return_value
    except Exception as error:
        return {"status": TrialStatus.failed, "error": f"{type(error).__name__}: {error}"}
    return dict(summary) if isinstance(summary, dict) else {"status": TrialStatus.failed, "error": f"returned {summary!r}"}


def succeeded(summary: Dict[str, Any]) -> bool:
    """Whether a trial counts as ok (a static-cluster peer node reports ``node_done`` + ``node_ok``)."""
    status = summary.get("status")
    return status == TrialStatus.ok or (status == NODE_DONE and bool(summary.get("node_ok")))


class Progress:
    """Counts trials and prints their lines; ``done`` is the number of trials that ended."""

    def __init__(self, total: int, out: TextIO = sys.stdout, clock: Callable[[], float] = time.monotonic) -> None:
        self.total = total
        self.done = 0
        self.out = out
        self.clock = clock
        self.started = clock()

    def starting(self, batch: Sequence[Sequence[str]]) -> None:
        """``[k/N] start key=value ...`` for every job of a batch about to launch (without the keys the driver adds)."""
        for offset, overrides in enumerate(batch):
            shown = " ".join(text for text, o in zip(overrides, parse_overrides(overrides))
                             if o.key_or_group not in SWEEPER_KEYS)
            print(f"[{self.done + offset + 1}/{self.total}] start {shown}", file=self.out, flush=True)

    def finished(self, summary: Dict[str, Any]) -> None:
        """``[k/N] <status> mode=... repeat=... wall=... steps/s=... ETA=...`` for a trial that ended."""
        self.done += 1
        elapsed = self.clock() - self.started
        eta = elapsed / self.done * (self.total - self.done)
        status = summary.get("status")
        note = " (already done; skipped)" if summary.get("resumed") else ""
        line = (
            f"[{self.done}/{self.total}] {status}{note} mode={summary.get('mode')} repeat={summary.get('repeat')} "
            f"wall={_fmt(summary.get('wall_s'), '.2f')}s steps/s={_fmt(summary.get('steps_per_s'), '.1f')} "
            f"ETA={eta:.0f}s"
        )
        if status != TrialStatus.ok and summary.get("error"):
            line += f" error: {summary['error']}"
        print(line, file=self.out, flush=True)
