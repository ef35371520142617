"""Within-trial switching (``switching=blocks``; docs/analysis.md): the ABBA block schedule, a pure function of
the step number and a recorded seed (every rank switches on the same step without a collective), the rank record's
``blocks`` and the trial's estimate. Import-light (no torch): the workload imports it.
"""

from __future__ import annotations

import math
import random
import statistics
from typing import Any, Final, Mapping, Sequence

from ddpbench.choices import SwitchWhat

#: a block's ``side``: the tool's switchable per-step work off or on
SIDES: Final[tuple[str, ...]] = ("off", "on")
SWITCH_WHAT: Final[tuple[str, ...]] = tuple(SwitchWhat)
#: keys of each entry of the rank record's ``blocks``: side, first timed step (1-based), steps in the block
#: (wash-out included), wash-out steps excluded, mean and median of the other steps' durations (s)
BLOCK_KEYS: Final[tuple[str, ...]] = ("side", "first_step", "steps", "washout_steps", "mean_s", "median_s")
#: keys of the rank record's ``switching``: what was switched, the block length and wash-out (steps), the first
#: block's side and the seed it was drawn from
SWITCHING_KEYS: Final[tuple[str, ...]] = ("what", "block_steps", "washout_steps", "first_side", "seed")


def first_side(seed: int) -> str:
    """The first block's side, drawn from ``seed`` (the same on every rank and on every re-run)."""
    return "on" if random.Random(int(seed)).random() < 0.5 else "off"


def block_side(block: int, first: str) -> str:
    """Side of block ``block`` (0-based) in ABBA order starting with ``first``."""
    other = "off" if first == "on" else "on"
    return first if block % 4 in (0, 3) else other


def step_is_on(step: int, block_steps: int, first: str) -> bool:
    """Whether the tool's switchable work is on at timed step ``step`` (1-based)."""
    return block_side((step - 1) // block_steps, first) == "on"


def block_summaries(durations_s: Sequence[float], block_steps: int, washout_steps: int, first: str) -> list[dict[str, Any]]:
    """The rank record's ``blocks`` from the timed steps' durations (s), in order (a short last block is kept when it
    has steps beyond its wash-out)."""
    blocks: list[dict[str, Any]] = []
    for index, start in enumerate(range(0, len(durations_s), block_steps)):
        steps = list(durations_s[start:start + block_steps])
        kept = steps[washout_steps:]
        if not kept:
            continue
        blocks.append({"side": block_side(index, first), "first_step": start + 1, "steps": len(steps),
                       "washout_steps": min(washout_steps, len(steps)), "mean_s": statistics.fmean(kept),
                       "median_s": statistics.median(kept)})
    return blocks


def check_blocks(switching: Any, blocks: Any) -> list[str]:
    """Problems of a rank record's ``switching`` and ``blocks`` (both null, or both set and consistent)."""
    if switching is None and blocks is None:
        return []
    if not isinstance(switching, dict) or not isinstance(blocks, list):
        return ["switching/blocks: both null or both set (an object and a list)"]
    problems = [f"switching.{key}: missing" for key in SWITCHING_KEYS if key not in switching]
    if switching.get("what") not in SWITCH_WHAT:
        problems.append(f"switching.what: {switching.get('what')!r} not one of {SWITCH_WHAT}")
    if switching.get("first_side") not in SIDES:
        problems.append(f"switching.first_side: {switching.get('first_side')!r} not one of {SIDES}")
    for i, block in enumerate(blocks):
        if not isinstance(block, dict) or any(key not in block for key in BLOCK_KEYS):
            problems.append(f"blocks[{i}]: must hold {', '.join(BLOCK_KEYS)}")
        elif block["side"] not in SIDES:
            problems.append(f"blocks[{i}].side: {block['side']!r} not one of {SIDES}")
        elif not all(isinstance(block[k], (int, float)) and math.isfinite(block[k]) and block[k] >= 0
                     for k in ("first_step", "steps", "washout_steps", "mean_s", "median_s")):
            problems.append(f"blocks[{i}]: first_step, steps, washout_steps, mean_s, median_s must be numbers >= 0")
    return problems


def combine_rank_blocks(ranks: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]] | None:
    """The trial's blocks: per block, the slowest rank's mean and median (ms: under DDP's all-reduce the job's step
    time). None without blocks."""
    per_rank = [r.get("blocks") for r in ranks]
    if not per_rank or any(not isinstance(b, list) for b in per_rank):
        return None
    return [{"side": entries[0]["side"], "first_step": entries[0]["first_step"], "steps": entries[0]["steps"],
             "washout_steps": entries[0]["washout_steps"], "mean_ms": max(e["mean_s"] for e in entries) * 1000.0,
             "median_ms": max(e["median_s"] for e in entries) * 1000.0}
            for entries in zip(*per_rank)]


def quad_differences(blocks: Sequence[Mapping[str, Any]], block_steps: int) -> list[float]:
    """(on − off) per complete ABBA quad (blocks 4k..4k+3: a linear drift cancels) of full blocks, in the blocks'
    unit (ms in trial records)."""
    diffs = []
    for k in range(len(blocks) // 4):
        quad = blocks[4 * k:4 * k + 4]
        if any(int(b["steps"]) != block_steps for b in quad):
            continue
        on = [float(b["mean_ms"]) for b in quad if b["side"] == "on"]
        off = [float(b["mean_ms"]) for b in quad if b["side"] == "off"]
        if len(on) == 2 and len(off) == 2:
            diffs.append(statistics.fmean(on) - statistics.fmean(off))
    return diffs


def trial_estimate(blocks: Sequence[Mapping[str, Any]], block_steps: int) -> dict[str, Any] | None:
    """The trial's within-trial per-step cost: mean of its quad differences (ms), its standard error (ms, null
    with one quad), the mean off-block step (ms), the cost as % of it, and the number of quads. None without a quad."""
    diffs = quad_differences(blocks, block_steps)
    if not diffs:
        return None
    off = [float(b["mean_ms"]) for b in blocks if b["side"] == "off"]
    off_ms = statistics.fmean(off) if off else float("nan")
    mean = statistics.fmean(diffs)
    se = statistics.stdev(diffs) / math.sqrt(len(diffs)) if len(diffs) > 1 else None
    return {"overhead_ms": mean, "se_ms": se, "off_step_ms": off_ms,
            "overhead_pct": 100.0 * mean / off_ms if off_ms > 0 else None, "quads": len(diffs)}


def trial_switching(ranks: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The trial record's ``switching`` from its rank records: rank 0's settings, the combined blocks and the
    trial's estimate; None when the ranks did not switch."""
    rank0 = next((r for r in ranks if r.get("rank") == 0), None)
    settings = rank0.get("switching") if rank0 else None
    blocks = combine_rank_blocks(ranks)
    if not isinstance(settings, dict) or blocks is None:
        return None
    return {**{key: settings.get(key) for key in SWITCHING_KEYS}, "blocks": blocks,
            "estimate": trial_estimate(blocks, int(settings["block_steps"]))}
