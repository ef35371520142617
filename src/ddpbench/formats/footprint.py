"""The trial record's ``footprint``: what every process of a trial cost (CPU seconds, CPU cores used, peak resident
memory, threads, bytes written to storage), per rank, per process kind and in total, from each node's guard record
(``nodes[].footprint``) and the ranks' own timed-steps CPU time. Which figures are exact and which sampled is stated
in the record (``method``); a figure that cannot be known is null with its reason in ``unknown``. Fields:
docs/formats.md, "Footprint".
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

#: the kind of a rank process, and of a process a rank forked that runs the rank's own command (DataLoader workers)
RANK_KIND = "rank"
RANK_WORKER_KIND = "rank worker"
#: which figures are the kernel's exact totals and which come from samples, as the record states them
EXACT = ("total.cpu_s", "total.user_s", "total.system_s", "total.write_bytes", "ranks[].timed_cpu_s",
         "cpu_s and write_bytes of processes the guard reaped itself (exact: true)")
#: figures that are the kernel's peaks but only upper bounds: a process started by fork and exec keeps the peak RSS
#: of the image it was forked from
UPPER_BOUNDS = ("total.largest_peak_rss_bytes", "peak_rss_bytes where peak_rss_upper_bound is true")
SAMPLED = ("ranks[].cpu_s", "ranks[].cores", "kinds[].cores", "ranks[].peak_rss_bytes", "ranks[].peak_threads", "ranks[].write_bytes", "kinds",
           "total.peak_rss_bytes", "total.peak_threads")


def _number(value: Any) -> Optional[float]:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _rate(cpu_s: float, span_s: float) -> Optional[float]:
    """CPU cores used: CPU seconds per wall second (None over no time)."""
    return cpu_s / span_s if span_s > 0 else None


def _processes(nodes: Sequence[Mapping[str, Any]], ranks: Sequence[Mapping[str, Any]]) -> List[Dict[str, Any]]:
    """Every sampled process of every measured node, with ``node_rank``, ``rank`` (None but for a rank) and its kind
    as the trial sees it (a rank's pid: ``rank``; a child of a rank running the same command: ``rank worker``)."""
    rank_of: Dict[Tuple[int, int], int] = {(int(r["node_rank"]), int(r["pid"])): int(r["rank"]) for r in ranks
                                           if isinstance(r.get("pid"), int) and isinstance(r.get("node_rank"), int)}
    found: List[Dict[str, Any]] = []
    for node in nodes:
        footprint = node.get("footprint")
        if not isinstance(footprint, dict):
            continue
        node_rank = int(node["node_rank"])
        listed = [p for p in footprint.get("processes") or [] if isinstance(p, dict)]
        kind_of = {int(p["pid"]): p["kind"] for p in listed}
        for process in listed:
            rank = rank_of.get((node_rank, int(process["pid"])))
            parent_rank = rank_of.get((node_rank, int(process["ppid"])))
            kind = process["kind"]
            if rank is not None:
                kind = RANK_KIND
            elif parent_rank is not None and kind_of.get(int(process["ppid"])) == kind:
                kind = RANK_WORKER_KIND
            found.append({**process, "node_rank": node_rank, "rank": rank, "kind": kind})
    return found


def _summed(processes: Sequence[Mapping[str, Any]]) -> Dict[str, Any]:
    """CPU s (exact where the guard reaped every one), cores (the CPU s the samples saw over the span from the first
    start to the last sample that saw one alive), the sum of the processes' peak RSS
    and threads (an upper bound of their simultaneous peak), bytes written (None if any is unknown)."""
    cpu_s = sum(float(p["cpu_s"]) for p in processes)
    span_s = max(float(p["last_seen_epoch"]) for p in processes) - min(float(p["started_epoch"]) for p in processes)
    sampled_cpu_s = sum(float(p.get("sampled_cpu_s") or 0.0) for p in processes)
    written = [p.get("write_bytes") for p in processes]
    known = [int(w) for w in written if isinstance(w, int)]
    return {"processes": len(processes), "cpu_s": cpu_s, "span_s": span_s, "cores": _rate(sampled_cpu_s, span_s),
            "peak_rss_bytes": sum(int(p["peak_rss_bytes"]) for p in processes),
            "peak_threads": sum(int(p["peak_threads"]) for p in processes),
            "write_bytes": sum(known) if len(known) == len(written) else None,
            "exact": all(bool(p.get("exact")) for p in processes),
            "peak_rss_upper_bound": any(bool(p.get("peak_rss_upper_bound")) for p in processes)}


def _rank_entries(ranks: Sequence[Mapping[str, Any]], processes: Sequence[Mapping[str, Any]],
                  unknown: Dict[str, str]) -> List[Dict[str, Any]]:
    entries = []
    for record in sorted(ranks, key=lambda r: int(r["rank"])):
        rank = int(record["rank"])
        mine = [p for p in processes if p["rank"] == rank]
        sampled = _summed(mine) if mine else None
        timed = record.get("timed_cpu_s") if isinstance(record.get("timed_cpu_s"), dict) else None
        train_s = _number(record.get("train_s"))
        if sampled is None:
            unknown[f"ranks[{rank}].cpu_s"] = "its node's guard did not see its process"
        if timed is None:
            unknown[f"ranks[{rank}].timed_cpu_s"] = "the rank did not measure its timed steps' CPU time"
        entries.append({
            "rank": rank, "node_rank": record.get("node_rank"), "pid": record.get("pid"),
            **{key: sampled[key] if sampled else None
               for key in ("cpu_s", "cores", "peak_rss_bytes", "peak_threads", "write_bytes", "exact")},
            "timed_cpu_s": _number(timed.get("total")) if timed else None,
            "timed_cpu_ms_per_step": _number(timed.get("per_step_ms")) if timed else None,
            "timed_cores": _rate(float(timed["total"]), train_s) if timed and train_s else None,
        })
    return entries


def _total(measured: Sequence[Mapping[str, Any]], processes: Sequence[Mapping[str, Any]]) -> Dict[str, Any]:
    """The kernel's totals over every process of every measured node, and the sampled simultaneous peaks."""
    exact = [n["footprint"]["exact"] for n in measured]
    cpu_s = sum(float(e["cpu_s"]) for e in exact)
    cores = [float(e["cpu_s"]) / float(n["wall_s"]) for e, n in zip(exact, measured) if _number(n.get("wall_s"))]
    sampled_cpu = sum(float(p["cpu_s"]) for p in processes)
    return {
        "cpu_s": cpu_s, "user_s": sum(float(e["user_s"]) for e in exact),
        "system_s": sum(float(e["system_s"]) for e in exact),
        "cores": sum(cores) if len(cores) == len(exact) else None,
        "write_bytes": sum(int(e["write_bytes"]) for e in exact),
        "largest_peak_rss_bytes": max(int(e["largest_peak_rss_bytes"]) for e in exact),
        "peak_rss_bytes": sum(int(n["footprint"]["sampled"]["peak_rss_bytes"]) for n in measured),
        "peak_threads": sum(int(n["footprint"]["sampled"]["peak_threads"]) for n in measured),
        "processes": len(processes),
        "unsampled_cpu_s": max(0.0, cpu_s - sampled_cpu),
        "guard_cpu_s": sum(float(n["footprint"].get("guard_cpu_s") or 0.0) for n in measured),
    }


def trial_footprint(nodes: Sequence[Mapping[str, Any]], ranks: Sequence[Mapping[str, Any]]) -> Dict[str, Any]:
    """The ``footprint`` section of a trial record from its node entries and its (valid) rank records."""
    measured = [n for n in nodes if isinstance(n.get("footprint"), dict)]
    unknown: Dict[str, str] = {}
    for node in nodes:
        if node not in measured:
            unknown[f"nodes[{node.get('node_rank')}]"] = ("its guard recorded no footprint (a node seen through its "
                                                          "ranks, a skipped node, or a backend whose guard record "
                                                          "this trial does not read)")
    processes = _processes(measured, ranks)
    kinds: Dict[str, List[Dict[str, Any]]] = {}
    for process in processes:
        kinds.setdefault(process["kind"], []).append(process)
    problems = sorted({str(p) for n in measured for p in n["footprint"].get("problems") or []})
    if problems:
        unknown["write_bytes"] = "; ".join(problems)
    if not measured:
        unknown["total"] = "no node's guard recorded a footprint"
    timed = [r for r in ranks if isinstance(r.get("timed_cpu_s"), dict)]
    if not timed or len(timed) != len(ranks):
        unknown["timed"] = "not every rank measured its timed steps' CPU time (or no rank record was read)"
    rank_entries = _rank_entries(ranks, processes, unknown)
    return {
        "method": {"sample_interval_s": max((float(n["footprint"]["sample_interval_s"]) for n in measured),
                                            default=None),
                   "samples": sum(int(n["footprint"]["samples"]) for n in measured),
                   "exact": list(EXACT), "sampled": list(SAMPLED), "upper_bounds": list(UPPER_BOUNDS)},
        "nodes_measured": sorted(int(n["node_rank"]) for n in measured),
        "ranks": rank_entries,
        "kinds": {kind: _summed(members) for kind, members in sorted(kinds.items())},
        "total": _total(measured, processes) if measured else None,
        "timed": {
            "cpu_s": sum(float(r["timed_cpu_s"]["total"]) for r in timed),
            "cpu_ms_per_step": sum(float(r["timed_cpu_s"]["per_step_ms"]) for r in timed) / len(timed),
        } if timed and len(timed) == len(ranks) else None,
        "unknown": unknown,
    }
