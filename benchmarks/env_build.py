"""How long a tool version's environment takes: the first build, and an arm's readiness once it is cached.

For each version (default traceml-ai 0.4.2 and 0.5.0 from PyPI) in a fresh cache folder: the first build
(venv + the tool alone, uv where found), then ``--repeats`` times what a later sweep does per arm before its
first trial (start Python, compose the config, find the cached environment, list its packages against the
sweep's, check the launcher's flags:
``ddpbench.versions.arm.prepare``), each in a fresh process so no in-process cache helps.
Goals: first build <= 60 s per version, cached arm ready <= 1 s.

    python benchmarks/env_build.py --out env_build.md
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine_line, now_utc, write_out  # noqa: E402

#: one arm's readiness in a fresh process, as the sweep driver does it before its first trial
_READY = r"""
import sys, time
start = time.monotonic()
import ddpbench.app  # registers the schema and the resolvers
from hydra import compose, initialize_config_module
from ddpbench.config import typed
from ddpbench.versions.arm import prepare
with initialize_config_module(config_module="ddpbench.conf", version_base="1.3"):
    cfg = compose("config", overrides=["mode=traceml", f"version={sys.argv[1]}", "sweep_name=bench"])
    composed = time.monotonic()
    prepare([typed(cfg)], say=lambda line: None)
print(time.monotonic() - composed, time.monotonic() - start)
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--versions", nargs="+", default=["0.4.2", "0.5.0"])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    from ddpbench.versions import envs
    from ddpbench.versions.spec import parse_spec

    data = {"machine": machine_line(), "date": now_utc(), "installer": "uv" if envs.find_uv() else "venv + pip",
            "versions": {}}
    with tempfile.TemporaryDirectory() as cache:
        os.environ[envs.CACHE_ENV] = cache
        for version in args.versions:
            start = time.monotonic()
            envs.build(parse_spec(version, "traceml-ai", Path.cwd()), f"traceml=={version}", say=lambda line: None)
            first = time.monotonic() - start
            ready: list = []
            whole: list = []
            for _ in range(args.repeats):
                out = subprocess.run([sys.executable, "-c", _READY, version], capture_output=True,
                                     text=True, check=True, env=dict(os.environ))
                arm_s, process_s = out.stdout.strip().splitlines()[-1].split()
                ready.append(float(arm_s))
                whole.append(float(process_s))
            data["versions"][version] = {"first_build_s": first, "cached_ready_s": ready, "process_s": whole}
    lines = [f"# Tool environments: first build and cached readiness ({data['installer']})", "",
             f"{data['machine']}; {data['date']}", "",
             "| version | first build (s) | cached arm ready, median (s) | max (s) | whole fresh process incl. Python, "
             "imports, Hydra compose, median (s) | goals |", "|---|---|---|---|---|---|"]
    for version, figures in data["versions"].items():
        ready = sorted(figures["cached_ready_s"])
        median = ready[len(ready) // 2]
        ok = figures["first_build_s"] <= 60 and median <= 1.0
        process = sorted(figures["process_s"])[len(ready) // 2]
        lines.append(f"| {version} | {figures['first_build_s']:.2f} | {median:.3f} | {ready[-1]:.3f} | {process:.2f} | "
                     f"{'met' if ok else 'missed'} |")
    text = "\n".join(lines) + "\n"
    print(text)
    write_out(args.out, text, data)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
