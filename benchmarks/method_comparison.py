"""The methods people use instead of ddpbench, side by side with its default, on the same workload, tool and budget.

Four methods estimate TraceML's cost per step (in % of the native step) at each ``--models`` size of the built-in
MLP on the local CPU cluster, each campaign given the same machine budget (``--budget-s``):

* **ddpbench**: ``python -m ddpbench -m mode=native,traceml repeat=1-N model=M stop.steps=S``, its report's
  ``step_overhead_pct`` with its 95 % paired t interval (analysis.json);
* **seed**: TraceML's benchmark-v1: alternating fixed-duration runs (``stop=duration``, native then tool, tool then
  native, ...), mean rank-0 throughput compared; its ± read as the standard error of the per-pair overheads;
* **whole_process**: hyperfine style: N runs of each command in a row (native torchrun, then ``traceml run``),
  mean ± SD of wall time, at S timed steps and at ``--short-steps``; the per-step cost is the long runs' wall
  difference less the short runs' (what start-up and teardown explain), over the native runs' added wall;
* **harness**: TraceML's attribution harness: N fresh native processes, then N tool processes, S steps each; the
  median of the per-process median steps, its noise floor max(SD, p95 − median) of the baseline's steps as ±.

The formulas: benchmarks/_method_stats.py. Each campaign is repeated ``--campaigns`` times, the methods'
campaigns interleaved (their order reversed every other round), each with an A/A campaign (native against
native, same budget) unless ``--skip-aa``. N per method is what fits the budget, from one timed unit of each
method run first (which also warms the machine), unless ``--pairs`` gives it. The bare runs (seed, whole_process,
harness) use ddpbench's own command and environment for the mode (``ddpbench.trial.command``) and its rank records.

Writes a dated JSON (machine, date, commit, settings, every campaign, the summary) and prints a markdown table per
model: each method's mean estimate, its empirical SD over the campaigns, that SD over ddpbench's (the headline),
its stated half-width, whether its interval holds the other methods' pooled estimate, and its A/A verdicts against
``--verdict-budget``. Usage::

    python benchmarks/method_comparison.py --campaigns 8 --budget-s 180 [--models tiny,small]
    python benchmarks/method_comparison.py --campaigns 2 --budget-s 40 --models tiny   # a smoke run
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import REPO, analysis, comparison, env, load, machine_line, now_utc, run_cmd, stamp  # noqa: E402
from _method_stats import (Estimate, Method, Summary, ddpbench_estimate, harness_estimate, seed_estimate,  # noqa: E402
                           summarize, units_for_budget, whole_process_estimate)

from ddpbench.choices import Choice, StopKind  # noqa: E402
from ddpbench.config import DdpbenchConfig  # noqa: E402

#: timed steps of a fixed-steps run per model when ``--steps`` is not given: ddpbench's default at ``tiny``, and
#: about the same 10-15 s of training at ``small``
DEFAULT_STEPS = {"tiny": 4000, "small": 1000}
#: benchmarks/conf: ``aa_as_tool`` (native under another name, judged as a tool) for ddpbench's A/A campaigns
BENCH_CONF = Path(__file__).resolve().parent / "conf"
TOOL_MODE, AA_MODE = "traceml", "aa_as_tool"


@dataclass(frozen=True)
class Setting:
    """One model's workload, the same for every method."""

    model: str
    # timed steps of the fixed-steps runs (ddpbench, whole_process's long runs, harness)
    steps: int
    # timed steps of whole_process's short runs
    short_steps: int
    # seconds of timed training of the seed's runs
    duration_s: float
    # more Hydra overrides, for every method
    extra: tuple[str, ...]


class RunStop(Choice):
    """When a bare run stops."""

    steps = "steps"  # after the setting's timed steps (whole_process's long runs, harness)
    short = "short"  # after whole_process's short runs' steps
    duration = "duration"  # after the seed's duration


@dataclass
class Run:
    """One bare run: its wall seconds (spawn to exit) and its ranks' records."""

    wall_s: float
    ranks: List[Dict[str, Any]]


class Runner:
    """Runs the bare commands of one setting: the configs composed once, each run in a folder of its own."""

    def __init__(self, setting: Setting, workdir: Path, timeout_s: float, keep: bool, again: int) -> None:
        self.setting, self.workdir, self.timeout_s, self.keep, self.again = setting, workdir, timeout_s, keep, again
        # why each run that was run again failed the first time
        self.retries: List[str] = []
        steps = compose(["mode=native", *self.overrides()]), compose([f"mode={TOOL_MODE}", *self.overrides()])
        self.native = {kind: with_stop(steps[0], kind, setting) for kind in RunStop}
        self.tool = {kind: with_stop(steps[1], kind, setting) for kind in RunStop}

    def overrides(self) -> list[str]:
        """The overrides the bare runs are composed with: no switching (no within-trial blocks)."""
        return [f"model={self.setting.model}", "switching=none", f"stop.steps={self.setting.steps}",
                *self.setting.extra]

    def run(self, cfg: DdpbenchConfig) -> Run:
        """One run of ``cfg``'s command, run again up to ``again`` times when it fails, as a user would (each
        failure's reason in ``retries``)."""
        for _ in range(self.again):
            try:
                return self._once(cfg)
            except RuntimeError as error:
                self.retries.append(f"{cfg.mode.name}: {str(error)[-300:]}")
        return self._once(cfg)

    def _once(self, cfg: DdpbenchConfig) -> Run:
        from ddpbench.cluster.ports import free_ports
        from ddpbench.formats.rank_record import read_rank_record
        from ddpbench.trial import artifacts
        from ddpbench.trial.command import make_context, node_command, node_environment
        from ddpbench.versions.arm import resolve_arm

        arm = resolve_arm(cfg, say=lambda _: None)
        root = self.workdir / "outputs" / "method-comparison-runs"
        root.mkdir(parents=True, exist_ok=True)
        job_dir = Path(tempfile.mkdtemp(prefix=f"{cfg.mode.name}-", dir=root))
        try:
            master, aggregator = free_ports(2)
            context = make_context(cfg, arm, node_rank=0, master_addr=cfg.cluster.master_addr, master_port=master,
                                   aggregator_port=aggregator, run_name=job_dir.name, job_dir=job_dir)
            artifacts.prepare(cfg, context)
            Path(context.metrics_dir).mkdir(parents=True, exist_ok=True)
            argv = node_command(cfg, arm, context)
            code, wall, err = run_cmd(argv, self.workdir, self.timeout_s, node_environment(cfg, arm, context, env()),
                                      quiet=True)
            if code != 0:
                raise RuntimeError(f"{cfg.mode.name} run exited {code}: {err[-1500:]}")
            ranks = []
            for path in sorted(Path(context.metrics_dir).glob("rank-*.json")):
                record, problems = read_rank_record(path)
                if record is None:
                    raise RuntimeError(f"{path}: {'; '.join(problems)}")
                ranks.append(record)
            if len(ranks) != cfg.cluster.nnodes * cfg.cluster.nproc_per_node:
                raise RuntimeError(f"{cfg.mode.name} run wrote {len(ranks)} rank records")
            return Run(wall, sorted(ranks, key=lambda r: int(r["rank"])))
        finally:
            if not self.keep:
                shutil.rmtree(job_dir, ignore_errors=True)


def compose(overrides: Sequence[str]) -> DdpbenchConfig:
    """The typed config ``python -m ddpbench OVERRIDES`` would run (composed in this process)."""
    import ddpbench.app  # noqa: F401  (registers the config schema)
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module

    from ddpbench.config.convert import typed

    with initialize_config_module("ddpbench.conf", version_base="1.3"):
        return typed(hydra_compose("config", overrides=list(overrides), return_hydra_config=True))


def with_stop(cfg: DdpbenchConfig, kind: RunStop, setting: Setting) -> DdpbenchConfig:
    """``cfg`` stopping after the setting's steps, its short runs' steps, or its duration."""
    stop = cfg.stop
    if kind == RunStop.steps:
        stop = dataclasses.replace(stop, kind=StopKind.steps, steps=setting.steps, duration_sec=None)
    elif kind == RunStop.short:
        stop = dataclasses.replace(stop, kind=StopKind.steps, steps=setting.short_steps, duration_sec=None)
    else:
        stop = dataclasses.replace(stop, kind=StopKind.duration, steps=None, duration_sec=setting.duration_s)
    return dataclasses.replace(cfg, stop=stop)


def steps_of(run: Run) -> List[float]:
    """A run's timed step times (ms), its ranks' pooled."""
    return [float(s) for r in run.ranks for s in (r.get("step_times_ms") or [])]


def campaign_ddpbench(runner: Runner, n: int, aa: bool, tag: str) -> tuple[Estimate, Dict[str, Any]]:
    """One ddpbench sweep of ``n`` pairs: its step_overhead_pct and interval."""
    s = runner.setting
    mode = AA_MODE if aa else TOOL_MODE
    name = f"bench-method-{s.model}-{'aa' if aa else 'tool'}-{tag}"
    code, _, err = run_cmd([sys.executable, "-m", "ddpbench", *(["--config-dir", str(BENCH_CONF)] if aa else []), "-m",
                            f"mode=native,{mode}", f"repeat=1-{n}", f"model={s.model}", f"stop.steps={s.steps}",
                            *s.extra, f"sweep_name={name}"], runner.workdir, 3600 + n * 2 * runner.timeout_s, quiet=True)
    sweep_dir = runner.workdir / "outputs" / "multirun" / name
    if not (sweep_dir / "analysis.json").is_file():  # a failed trial leaves its pair out; no report fails the campaign
        raise RuntimeError(f"ddpbench exited {code} without a report: {err[-1500:]}")
    c = comparison(analysis(sweep_dir), mode)
    est = ddpbench_estimate(c["metrics"]["step_overhead_pct"], int(c["n_pairs"]))
    return est, {"sweep_dir": str(sweep_dir), "own_verdict": c["verdict"]["status"], "exit_code": code}


def campaign_seed(runner: Runner, n: int, aa: bool, tag: str) -> tuple[Estimate, Dict[str, Any]]:
    """``n`` alternating pairs of fixed-duration runs (native first on odd pairs): rank 0's steps/s."""
    base, other = runner.native[RunStop.duration], (runner.native if aa else runner.tool)[RunStop.duration]
    b: List[float] = []
    x: List[float] = []
    for i in range(n):
        for side in ((0, 1) if i % 2 == 0 else (1, 0)):
            run = runner.run(base if side == 0 else other)
            (b if side == 0 else x).append(float(run.ranks[0]["steps_per_s"]))
    return seed_estimate(b, x), {"native_steps_per_s": b, "tool_steps_per_s": x}


def campaign_whole_process(runner: Runner, n: int, aa: bool, tag: str) -> tuple[Estimate, Dict[str, Any]]:
    """Two hyperfine invocations: ``n`` long runs of native then ``n`` of the tool; the same at the short length."""
    tool = runner.native if aa else runner.tool
    walls: Dict[str, List[float]] = {}
    for length in (RunStop.steps, RunStop.short):
        for side, cfgs in (("native", runner.native), ("tool", tool)):
            walls[f"{side}_{length.value}"] = [runner.run(cfgs[length]).wall_s for _ in range(n)]
    est = whole_process_estimate(walls["native_steps"], walls["tool_steps"], walls["native_short"],
                                 walls["tool_short"])
    return est, {"wall_s": walls}


def campaign_harness(runner: Runner, n: int, aa: bool, tag: str) -> tuple[Estimate, Dict[str, Any]]:
    """``n`` fresh native processes, then ``n`` tool processes; each one's step times."""
    tool = (runner.native if aa else runner.tool)[RunStop.steps]
    base_runs = [steps_of(runner.run(runner.native[RunStop.steps])) for _ in range(n)]
    tool_runs = [steps_of(runner.run(tool)) for _ in range(n)]
    est = harness_estimate(base_runs, tool_runs)
    return est, {"native_medians_ms": [statistics.median(p) for p in base_runs],
                 "tool_medians_ms": [statistics.median(p) for p in tool_runs]}


CAMPAIGNS: Dict[Method, Callable[[Runner, int, bool, str], tuple[Estimate, Dict[str, Any]]]] = {
    Method.ddpbench: campaign_ddpbench, Method.seed: campaign_seed, Method.whole_process: campaign_whole_process,
    Method.harness: campaign_harness,
}


def unit_costs(runner: Runner, methods: Sequence[Method], tag: str) -> Dict[Method, tuple[float, float]]:
    """Each method's seconds per unit (a pair; for whole_process a long and a short run of each command), tool and
    A/A, from one run of each kind (the first also warms the machine up); ddpbench's from a 2-pair sweep."""
    walls = {f"{side}_{kind.value}": runner.run(cfgs[kind]).wall_s
             for kind in RunStop for side, cfgs in (("native", runner.native), ("tool", runner.tool))}
    out: Dict[Method, tuple[float, float]] = {
        Method.seed: (walls["native_duration"] + walls["tool_duration"], 2 * walls["native_duration"]),
        Method.whole_process: (walls["native_steps"] + walls["tool_steps"] + walls["native_short"]
                               + walls["tool_short"], 2 * (walls["native_steps"] + walls["native_short"])),
        Method.harness: (walls["native_steps"] + walls["tool_steps"], 2 * walls["native_steps"]),
    }
    if Method.ddpbench in methods:
        started = time.monotonic()
        campaign_ddpbench(runner, 2, False, f"sizing-{tag}")
        pair = (time.monotonic() - started) / 2
        out[Method.ddpbench] = (pair, pair * out[Method.harness][1] / out[Method.harness][0])
    print(f"sizing [{runner.setting.model}]: " + ", ".join(f"{k} {v:.1f} s" for k, v in walls.items()),
          file=sys.stderr, flush=True)
    return out


def _num(x: float, digits: int = 2, sign: bool = False) -> str:
    return "n/a" if not math.isfinite(x) else (f"{x:+.{digits}f}" if sign else f"{x:.{digits}f}")


def _share(x: float) -> str:
    return "n/a" if not math.isfinite(x) else f"{100 * x:.0f} %"


def table(model: str, summaries: Sequence[Summary], pairs: Dict[Method, int]) -> List[str]:
    """The markdown table of one model's summaries."""
    lines = [f"### model={model}", "",
             "| method | campaigns (tool / A/A) | mean % | empirical SD (pp) | SD / ddpbench's | stated half-width (pp) | "
             "covers the others' pooled | A/A false over | A/A within | A/A interval leaves out 0 | N | machine s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in summaries:
        lines.append(f"| {s.method.value} | {s.campaigns} / {s.aa_campaigns} | {_num(s.mean_pct, sign=True)} | {_num(s.sd_pct)} | "
                     f"{_num(s.sd_ratio)} | {_num(s.half_width_pct)} | {_share(s.covers_others)} "
                     f"({_num(s.others_pct, sign=True)}) | {_share(s.aa_false_over)} | {_share(s.aa_within)} | "
                     f"{_share(s.aa_excludes_zero)} | {pairs.get(s.method, 0)} | {_num(s.machine_s, 0)} |")
    return lines


def summaries_of(records: Sequence[Dict[str, Any]], model: str, methods: Sequence[Method],
                 budget_pct: float) -> List[Summary]:
    """The summary of one model's finished campaigns."""
    mine = [r for r in records if r["model"] == model and "error" not in r]

    def estimates(method: Method, aa: bool) -> List[Estimate]:
        return [Estimate(r["pct"], r["half_width_pct"], r["n"]) for r in mine if r["method"] == method and r["aa"] == aa]

    machine = {m: [r["machine_s"] for r in mine if r["method"] == m and not r["aa"]] for m in methods}
    return summarize({m: estimates(m, False) for m in methods}, {m: estimates(m, True) for m in methods}, machine,
                     budget_pct)


def commit() -> str:
    """The repository's short HEAD, ``-dirty`` when its tracked files differ."""
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", str(REPO), "diff", "--quiet", "HEAD"], capture_output=True).returncode
    return head.stdout.strip() + ("-dirty" if dirty else "")


def parse_pairs(text: str | None) -> Dict[Method, int]:
    """``ddpbench=5,seed=4``: units per campaign given instead of sized."""
    out: Dict[Method, int] = {}
    for item in filter(None, (text or "").split(",")):
        name, _, value = item.partition("=")
        out[Method(name.strip())] = int(value)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--campaigns", type=int, default=8, help="K: campaigns of each method (>= 8 for the figure)")
    p.add_argument("--budget-s", type=float, default=180.0, help="machine seconds per method per campaign")
    p.add_argument("--models", default="tiny,small", help="model configs, comma-separated")
    p.add_argument("--methods", default=",".join(m.value for m in Method), help="methods, comma-separated")
    p.add_argument("--steps", type=int, default=None, help=f"timed steps of fixed-steps runs (default {DEFAULT_STEPS})")
    p.add_argument("--short-steps", type=int, default=10, help="timed steps of whole_process's short runs")
    p.add_argument("--duration-s", type=float, default=10.0, help="seconds of timed training of the seed's runs")
    p.add_argument("--pairs", default=None, help="units per campaign instead of sizing them, e.g. ddpbench=3,seed=2")
    p.add_argument("--verdict-budget", type=float, default=2.0, help="the overhead budget the verdicts use, %%")
    p.add_argument("--skip-aa", action="store_true", help="no A/A campaigns")
    p.add_argument("--extra", nargs="*", default=[], help="more Hydra overrides for every method")
    p.add_argument("--workdir", type=Path, default=Path.cwd(), help="where outputs/ goes (default: cwd)")
    p.add_argument("--timeout", type=float, default=600.0, help="per bare run, s")
    p.add_argument("--keep", action="store_true", help="keep the bare runs' folders")
    p.add_argument("--retries", type=int, default=1, help="times a failed bare run is run again")
    p.add_argument("--out", type=Path, default=None, help="the JSON (default outputs/method_comparison-<date>.json)")
    args = p.parse_args(argv)
    methods = [Method(m.strip()) for m in args.methods.split(",") if m.strip()]
    tag, started, load_before = stamp(), now_utc(), load()
    out = args.out or args.workdir / "outputs" / f"method_comparison-{tag}.json"
    given = parse_pairs(args.pairs)
    settings = [Setting(m, args.steps or DEFAULT_STEPS.get(m, 1000), args.short_steps, args.duration_s,
                        tuple(args.extra)) for m in args.models.split(",")]
    data: Dict[str, Any] = {
        "benchmark": "method_comparison", "started": started, "machine": machine_line(), "commit": commit(),
        "load_before": load_before, "settings": {**{k: (str(v) if isinstance(v, Path) else v)
                                                     for k, v in vars(args).items()},
                                                  "per_model": [dataclasses.asdict(s) for s in settings]},
        "pairs": {}, "campaigns": [], "summary": {}}
    runners = {s.model: Runner(s, args.workdir, args.timeout, args.keep, args.retries) for s in settings}
    for s in settings:
        missing = [m for m in methods if m not in given]
        costs = unit_costs(runners[s.model], missing, tag) if missing else {}
        data["pairs"][s.model] = {m.value: {"tool": given.get(m) or units_for_budget(args.budget_s, costs[m][0]),
                                            "aa": given.get(m) or units_for_budget(args.budget_s, costs[m][1])}
                                  for m in methods}
    slots = [(m, aa) for m in methods for aa in ((False,) if args.skip_aa else (False, True))]
    for k in range(args.campaigns):
        for s in settings:
            for method, aa in (slots if k % 2 == 0 else slots[::-1]):
                n = data["pairs"][s.model][method.value]["aa" if aa else "tool"]
                record: Dict[str, Any] = {"model": s.model, "campaign": k + 1, "method": method.value, "aa": aa,
                                          "n_planned": n, "started": now_utc(), "load_before": load()}
                t0, retried = time.monotonic(), len(runners[s.model].retries)
                try:
                    est, extra = CAMPAIGNS[method](runners[s.model], n, aa, f"{tag}-{k + 1}")
                    record.update(pct=est.pct, half_width_pct=est.half_width_pct, n=est.n,
                                  status=est.status(args.verdict_budget), **extra)
                except (RuntimeError, ValueError) as error:  # a failed run, or figures no estimate can use
                    record["error"] = str(error)[-2000:]
                record["machine_s"] = time.monotonic() - t0
                record["runs_run_again"] = runners[s.model].retries[retried:]
                data["campaigns"].append(record)
                print(f"[{k + 1}/{args.campaigns}] {s.model} {method.value}{' A/A' if aa else ''}: "
                      + (f"{_num(record['pct'], sign=True)} % ± {_num(record['half_width_pct'])} ({record['status']}, "
                         f"n={record['n']})" if "error" not in record else f"failed: {record['error'][-300:]}")
                      + f" in {record['machine_s']:.0f} s", file=sys.stderr, flush=True)
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_text(json.dumps(data, indent=2, default=str) + "\n")
    lines = [f"method_comparison  {started} to {now_utc()}", machine_line(), f"commit {data['commit']}",
             f"load average (1/5/15 min) before: {load_before}; after: {load()}",
             f"budget {args.budget_s:g} s per method per campaign, {args.campaigns} campaigns, verdicts against "
             f"{args.verdict_budget:g} %; TraceML vs native, cluster=local_cpu; "
             + "; ".join(f"{s.model}: {s.steps} steps (short runs {s.short_steps}), seed runs {s.duration_s:g} s"
                         for s in settings), ""]
    for s in settings:
        summaries = summaries_of(data["campaigns"], s.model, methods, args.verdict_budget)
        data["summary"][s.model] = [{**dataclasses.asdict(x), "method": x.method.value} for x in summaries]
        pairs = {m: data["pairs"][s.model][m.value]["tool"] for m in methods}
        lines += [*table(s.model, summaries, pairs), ""]
    failed = [r for r in data["campaigns"] if "error" in r]
    lines.append(f"failed campaigns: {len(failed)}; data: {out}")
    data["load_after"], data["ended"] = load(), now_utc()
    out.write_text(json.dumps(data, indent=2, default=str) + "\n")
    print("\n".join(lines))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
