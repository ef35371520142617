"""``ddpbench-bisect MODE GOOD BAD [key=value ...]``: the first commit of a tool's range that made training slower.

GOOD and BAD are ``REPO@REF`` of one local git repository of the mode's tool; the overrides are ddpbench's.
Exit status: 0 found, 3 inconclusive or no regression, 2 bad input (one line), 128 + signal when stopped.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import List, NoReturn, Optional, Sequence, Tuple

from ddpbench.bisect import commits as git
from ddpbench.bisect.run import Bisection, folder_of
from ddpbench.bisect.step import Interrupted, Plan, Rule
from ddpbench.config import DdpbenchConfig, switches, typed
from ddpbench.errors import ConfigError, DdpbenchError, fail
from ddpbench.formats.condition import parse_overrides

#: keys the bisection sets itself in every look's sweep
OWN_KEYS = ("mode", "versions", "version", "baseline", "repeat", "hydra.sweep.dir", "hydra.sweep.subdir")
_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        fail(f"{message} (ddpbench-bisect --help)")


def parser() -> argparse.ArgumentParser:
    """The command line: a mode, the good and the bad REPO@REF, ddpbench's overrides."""
    p = _Parser(prog="ddpbench-bisect", description=__doc__.split("\n\n")[0] if __doc__ else None,
                epilog="Exit status: 0 found, 3 inconclusive or no regression, 2 bad input.")
    p.add_argument("mode", help="the mode whose tool is bisected (its requires_package is built at each commit)")
    p.add_argument("good", help="REPO@REF of the commit known good (a local git repository of the tool)")
    p.add_argument("bad", help="REPO@REF of the commit known slower (the same repository)")
    p.add_argument("overrides", nargs="*", help="ddpbench overrides (key=value); sweep_name=NAME names (and resumes) it")
    p.add_argument("--config-dir", default=None, help="a folder of your own configs (e.g. mode/<name>.yaml)")
    return p


def split_overrides(overrides: Sequence[str]) -> Tuple[List[str], Optional[str]]:
    """(the overrides every look passes on, the sweep_name given); ConfigError for one the bisection sets itself."""
    kept, name = [], None
    try:
        parsed = parse_overrides(overrides)
    except ConfigError as error:
        raise ConfigError(f"bisect: {error}") from None
    for text, override in zip(overrides, parsed):
        key = override.key_or_group
        if key in OWN_KEYS:
            raise ConfigError(f"bisect: {key}= is set by the bisection itself (each look's sweep); leave it out")
        if key == "sweep_name":
            name = str(override.value())
        else:
            kept.append(text)
    if name is not None and (not name or set(name) - _NAME_CHARS):
        raise ConfigError(f"bisect: sweep_name={name!r}: must use letters, digits, '.', '_', '-'")
    return kept, name


def composed(mode: str, overrides: Sequence[str], config_dir: Optional[str]) -> DdpbenchConfig:
    """The config the looks will run with (``python -m ddpbench --cfg job --resolve``); ConfigError with its first line."""
    from omegaconf import DictConfig, OmegaConf

    argv = [sys.executable, "-m", "ddpbench", *(["--config-dir", config_dir] if config_dir else []), "--cfg", "job",
            "--resolve", f"mode={mode}", *overrides]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        lines = [line for line in (out.stderr + out.stdout).splitlines() if line.strip()]
        raise ConfigError(f"bisect: the overrides do not compose: {(lines or ['no output'])[0].strip()}"
                          .replace("ddpbench: error: ", ""))
    cfg = OmegaConf.create(out.stdout)
    assert isinstance(cfg, DictConfig)
    return typed(cfg)


def rule_of(cfg: DdpbenchConfig) -> Rule:
    """The decision rule from the composed config; ConfigError when it is unusable."""
    from ddpbench.analysis.sequential import check_rule

    precision = cfg.precision
    rule = Rule(regression_pct=cfg.regression_pct, min_pairs=precision.min_pairs, max_pairs=precision.max_pairs,
                max_minutes=precision.max_minutes, spending=precision.spending, disturbed=precision.disturbed,
                switched=switches(cfg))
    if not rule.regression_pct > 0:
        raise ConfigError(f"regression_pct={rule.regression_pct}: must be > 0")
    try:
        check_rule(0.95, None, rule.min_pairs, rule.max_pairs, rule.max_minutes, rule.spending)
    except ValueError as error:
        raise ConfigError(f"precision: {error}") from None
    return rule


def prepare(args: argparse.Namespace, base: Path) -> Bisection:
    """Every input checked (one ConfigError line at the first that is wrong), the bisection ready to run."""
    from ddpbench.formats.condition import arm_name
    from ddpbench.versions.spec import parse_spec

    overrides, name = split_overrides(args.overrides)
    config_dir = str(Path(args.config_dir).resolve()) if args.config_dir else None
    cfg = composed(args.mode, overrides, config_dir)
    package = cfg.mode.requires_package
    if not package:
        raise ConfigError(f"bisect: mode={args.mode} names no requires_package: it has no tool to build at each commit")
    rule = rule_of(cfg)
    repo, good_ref = git.split_ref(args.good, base)
    bad_repo, bad_ref = git.split_ref(args.bad, base)
    if bad_repo != repo:
        raise ConfigError(f"bisect: good and bad are in different repositories ({repo}, {bad_repo})")
    good, bad = git.resolve(repo, good_ref), git.resolve(repo, bad_ref)
    commits = git.commit_range(repo, good, bad)
    good_spec = f"{repo}@{good.short}"
    parse_spec(good_spec, package, base)
    name = name or time.strftime("bisect-%Y-%m-%d_%H-%M-%S") + f"_{os.getpid()}"
    folder = folder_of(name, base)
    inputs = {"name": name, "mode": args.mode, "package": package, "repo": str(repo),
              "good": {"ref": good_ref, "commit": good.commit, "subject": good.subject},
              "bad": {"ref": bad_ref, "commit": bad.commit, "subject": bad.subject},
              "commits": [{"commit": c.commit, "subject": c.subject} for c in commits],
              "overrides": list(overrides), "config_dir": config_dir,
              "rule": {"metric": rule.metric, "switched": rule.switched, "regression_pct": rule.regression_pct,
                       "confidence": 0.95, "min_pairs": rule.min_pairs, "max_pairs": rule.max_pairs,
                       "max_minutes": rule.max_minutes, "spending": rule.spending, "disturbed": rule.disturbed}}
    plan = Plan(name=name, mode=args.mode, good_spec=good_spec, good_arm=arm_name(args.mode, good_spec),
                overrides=overrides, config_dir=config_dir, folder=folder, rule=rule)
    return Bisection(inputs, commits, plan)


def main(argv: Optional[Sequence[str]] = None) -> None:
    """Console entry point (``ddpbench-bisect``, ``python -m ddpbench.bisect``)."""
    from ddpbench.io import writable_dir_problem
    from ddpbench.sweep.lock import hold_sweep_lock

    args = parser().parse_intermixed_args(argv)
    try:
        bisection = prepare(args, Path.cwd())
        problem = writable_dir_problem(bisection.folder)
        if problem is not None:
            raise ConfigError(f"cannot write the bisection's folder {bisection.folder}: {problem}")
        hold_sweep_lock(bisection.folder, 0)  # one bisection per name at a time
        print(f"ddpbench-bisect: {len(bisection.commits)} commit(s) after {bisection.inputs['good']['commit'][:12]} "
              f"up to {bisection.inputs['bad']['commit'][:12]} -> {bisection.folder}", flush=True)
        code = bisection.run()
    except DdpbenchError as error:
        fail(str(error))
    except Interrupted as stop:
        print(f"ddpbench-bisect: stopped; the same sweep_name={bisection.plan.name} resumes it", file=sys.stderr,
              flush=True)
        raise SystemExit(stop.code) from None
    except KeyboardInterrupt:
        print("ddpbench-bisect: interrupted; the same sweep_name= resumes it", file=sys.stderr, flush=True)
        raise SystemExit(130) from None
    raise SystemExit(code)
