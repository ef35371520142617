#!/usr/bin/env bash
# check-wheel.sh: ddpbench installed like a library, checked as a new user would meet it.
#
#   bash scripts/check-wheel.sh        # run by tests/test_packaging.py (marked slow) and so by .ci/run
#
# 1. `python -m build`: the sdist, and the wheel built from it.
# 2. Both carry conf/ (as ddpbench/conf in the wheel) and the plugins; nothing under tests/ or outputs/ ships.
# 3. A fresh virtual environment (no system site-packages: an editable ddpbench there would leak in) gets
#    the CPU torch (TORCH_SPEC, default torch==2.13.0: a local wheel through pip's find-links, or PyPI),
#    then the wheel with its dependencies from the package index.
# 4. From an empty folder: a missing traceml-ai is a one-line error; with the traceml extra, `ddpbench
#    --help`, `--version` (console script and `python -m ddpbench` alike) and a short paired sweep that
#    writes ./outputs with a report; then tests/other_app, an unrelated Hydra app, starts and can select
#    hydra/sweeper=paired. Hydra's plugin scan time is printed.
#
# Environment: PYTHON (default python3); TORCH_SPEC; KEEP=1 keeps the work dir; RUN_IN=DIR: an empty folder
# to run in instead of a temporary one, kept with ./outputs and the sweep's log (sweep.log) for a test's
# own checks. Needs the `build` package.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
PY=${PYTHON:-python3}
work=$(mktemp -d /tmp/ddpbench-wheel.XXXXXX)
if [ "${KEEP:-}" != 1 ]; then trap 'rm -rf "$work"' EXIT; fi
say() { echo "check-wheel: [${SECONDS}s] $*" >&2; }
fail() { echo "check-wheel: error: $*" >&2; exit 1; }

say "building sdist and wheel in $work/dist"
bash scripts/copy-checkout.sh "$work/source"
"$PY" -m build --outdir "$work/dist" "$work/source" >"$work/build.log" 2>&1 \
    || { tail -20 "$work/build.log" >&2; fail "python -m build failed"; }
sdist=$(ls "$work"/dist/ddpbench-*.tar.gz)
wheel=$(ls "$work"/dist/ddpbench-*-py3-none-any.whl)

"$PY" - "$sdist" "$wheel" <<'EOF'
import sys, tarfile, zipfile

sdist, wheel = sys.argv[1:3]
with tarfile.open(sdist) as tar:
    sdist_names = [name.split("/", 1)[1] for name in tar.getnames() if "/" in name]
wheel_names = zipfile.ZipFile(wheel).namelist()
problems = []
for label, names, needed in (
    ("sdist", sdist_names, ["conf/config.yaml", "conf/mode/native.yaml", "setup.py",
                            "src/hydra_plugins/ddpbench_sweeper/paired_sweeper.py"]),
    ("wheel", wheel_names, ["ddpbench/conf/config.yaml", "ddpbench/conf/mode/native.yaml",
                            "ddpbench/conf/hydra/sweeper/ddpbench.yaml",
                            "ddpbench/conf/cluster/local_cpu.yaml", "ddpbench/py.typed",
                            "ddpbench/sweep/driver.py", "hydra_plugins/ddpbench_sweeper/paired_sweeper.py",
                            "hydra_plugins/ddpbench_sweeper/bounded_slurm_launcher.py"]),
):
    problems += [f"{label} lacks {name}" for name in needed if name not in names]
    problems += [f"{label} ships {name}" for name in names if name.split("/")[0] in ("tests", "outputs")
                 or "/tests/" in name or "__editable__" in name]
if problems:
    sys.exit("check-wheel: error: " + "; ".join(problems[:10]))
print(f"check-wheel: sdist {len(sdist_names)} files, wheel {len(wheel_names)} files: contents ok", file=sys.stderr)
EOF

say "fresh venv $work/venv: ${TORCH_SPEC:-torch==2.13.0}, then the wheel"
"$PY" -m venv "$work/venv"
VPY="$work/venv/bin/python"
pip_install() { "$VPY" -m pip install --quiet --no-compile "$@" >"$work/pip.log" 2>&1 || { tail -20 "$work/pip.log" >&2; fail "pip install $*"; }; }
pip_install "${TORCH_SPEC:-torch==2.13.0}"
pip_install "$wheel"
say "installed"

empty=${RUN_IN:-$work/empty}
mkdir -p "$empty"
[ -z "$(ls -A "$empty")" ] || fail "$empty is not empty"
cd "$empty"
export PATH="$work/venv/bin:$PATH"
unset PYTHONPATH
# the first process to import a module caches its bytecode: every trial's processes import torch, and with
# PYTHONDONTWRITEBYTECODE (often set) each of them would compile it again
unset PYTHONDONTWRITEBYTECODE

set +e
out=$(ddpbench mode=traceml model=tiny 2>&1); rc=$?
set -e
[ "$rc" -eq 2 ] && [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] && [[ "$out" == "ddpbench: error: "*traceml* ]] \
    || fail "without traceml-ai, mode=traceml should be one error line and exit 2; got rc $rc: $out"
pip_install "$wheel[traceml]"

help=$(ddpbench --help)
[[ "$(printf '%s\n' "$help" | head -1)" == "ddpbench measures "* ]] || fail "ddpbench --help does not open with what ddpbench does"
for word in "ddpbench -m mode=native,traceml" ddpbench-report ddpbench-collect "mode: " "cluster: "; do
    [[ "$help" == *"$word"* ]] || fail "ddpbench --help lacks '$word'"
done
[ "$(python -m ddpbench --help)" = "$help" ] || fail "python -m ddpbench --help differs from ddpbench --help"
version=$(ddpbench --version)
[[ "$version" =~ ^ddpbench\ [0-9]+\.[0-9]+ ]] || fail "ddpbench --version printed '$version'"
[ "$(python -m ddpbench --version)" = "$version" ] || fail "python -m ddpbench --version differs"
say "$version; --help ok"

say "traceml extra installed; sweeping"
# switching=none: the test that reads this sweep checks the classic pair (TraceML wraps every step)
ddpbench -m mode=native,traceml repeat=1 model=tiny stop.steps=20 switching=none >"$work/sweep.log" 2>&1 \
    || { tail -30 "$work/sweep.log" >&2; fail "the sweep failed"; }
cp "$work/sweep.log" "$empty/sweep.log"
"$VPY" - <<'EOF'
import json, pathlib, sys

sweeps = [p for p in pathlib.Path("outputs/multirun").iterdir() if p.is_dir()]
trials = [json.loads(p.read_text()) for p in sweeps[0].glob("*/trial.json")] if len(sweeps) == 1 else []
if sorted(t["mode"] for t in trials if t["status"] == "ok") != ["native", "traceml"] or not (sweeps[0] / "report.md").is_file():
    sys.exit(f"check-wheel: error: expected one sweep dir with an ok native and traceml trial and report.md under ./outputs: {sweeps}")
print(f"check-wheel: sweep ok: {sweeps[0]}", file=sys.stderr)
EOF

cp -r "$REPO/tests/other_app" "$work/other_app"
cd "$work/other_app"
[ "$(python other_app.py x=3)" = "other_app: x=3 greeting=hello" ] || fail "the other Hydra app does not run"
swept=$(python other_app.py -m hydra/sweeper=paired x=1,2 greeting=hi 2>&1) || fail "other app with the paired sweeper: $swept"
[[ "$swept" == *"other_app: x=1 greeting=hi"*"other_app: x=2 greeting=hi"* ]] \
    || fail "other app with hydra/sweeper=paired: $swept"
say "the other Hydra app runs, and with hydra/sweeper=paired"

python - <<'EOF'
import sys
from hydra.core.plugins import Plugins

stats = Plugins.instance().get_stats()
ours = sum(t for name, t in stats.modules_import_time.items() if "ddpbench" in name)
print(f"check-wheel: Hydra plugin scan {stats.total_time * 1000:.0f} ms, of which ddpbench's plugins "
      f"{ours * 1000:.0f} ms", file=sys.stderr)
EOF
say "ok"
