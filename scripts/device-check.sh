#!/usr/bin/env bash
# device-check.sh: ddpbench's GPU check on a lent device machine, prepared here (docs/gpu.md).
#
#   scripts/device-check.sh prepare    # here: ddpbench's wheel + the wheels the device image lacks -> .whl/, checked
#   scripts/device-check.sh run        # there (device tool `run`, carry [".whl"]): install into a target dir,
#                                      # three time-bounded sweeps on one GPU, results bundled into $OUT
#   scripts/device-check.sh selftest   # here: the same run path on CPU (cluster=local_cpu, tiny model, short trials)
#
# Environment: PYTHON (python3); WHEEL_DIR (<checkout>/.whl); WORK_DIR (a new /tmp folder:
# sweeps, install target); OUT (where the bundle goes; the device tool sets it; default WORK_DIR/out);
# PRECISION (run: fp16, the reference, or bf16); BUDGET_S (510: the whole run's wall-clock bound, s);
# per sweep (ref, calibration, aa): REF_PAIRS REF_SEC REF_CAP_S, CAL_PAIRS CAL_SEC CAL_CAP_S INJECT_MS,
# AA_PAIRS AA_SEC AA_CAP_S (pairs, timed seconds per trial, the sweep's wall-clock bound; 0 pairs skips it).
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python3}
WHEEL_DIR=${WHEEL_DIR:-$REPO/.whl}
HELPER=$REPO/scripts/device_check.py

die() { echo "device-check: error: $*" >&2; exit 2; }
log() { echo "device-check: $*"; }
# pip here warns about index folders of this machine's pip.conf that do not exist: noise
quiet_pip() { "$PY" -m pip "$@" 2> >(grep -v "is neither a file nor a directory" >&2); }

# Pinned: the versions ddpbench's tests pass with. antlr4-python3-runtime is the one hydra-core 1.3
# requires (==4.9.*); 4.9.3 exists only as a source archive, so its (pure) wheel is built here.
PINNED=(hydra-core==1.3.8 omegaconf==2.3.1 submitit==1.5.4 hydra-submitit-launcher==1.2.0 traceml-ai==0.5.0
        msgspec==0.23.0)
FROM_SOURCE=(antlr4-python3-runtime==4.9.3)

prepare() {
    [ $# -eq 0 ] || die "prepare takes no arguments"
    local tmp stray
    if [ -d "$WHEEL_DIR" ]; then
        stray=$(find "$WHEEL_DIR" -mindepth 1 -not -name '*.whl' -not -name SOURCE.txt -print -quit)
        [ -z "$stray" ] || die "$WHEEL_DIR holds more than wheels ($stray); not replacing it"
    fi
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/ddpbench-wheels.XXXXXX")
    chmod 755 "$tmp"
    trap 'rm -rf "$tmp"' EXIT
    log "building ddpbench's wheel from $REPO"
    bash "$REPO/scripts/copy-checkout.sh" "$tmp/source"
    quiet_pip wheel -q --no-deps -w "$tmp" "$tmp/source"
    rm -rf "$tmp/source"
    log "downloading ${PINNED[*]} for CPython 3.12, manylinux x86-64"
    quiet_pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp --abi cp312 \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d "$tmp" "${PINNED[@]}"
    log "building ${FROM_SOURCE[*]} from source (pure Python)"
    quiet_pip wheel -q --no-deps --no-binary=antlr4-python3-runtime -w "$tmp" "${FROM_SOURCE[@]}"
    {
        echo "prepared $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(uname -n) by $("$PY" --version 2>&1)"
        echo "checkout $(git -C "$REPO" rev-parse HEAD 2>/dev/null || echo unknown)$(
            [ -n "$(git -C "$REPO" status --porcelain --untracked-files=no 2>/dev/null)" ] && echo -dirty)"
    } >"$tmp/SOURCE.txt"
    "$PY" "$HELPER" check "$tmp" "$REPO" || die "the wheel set failed its checks (above); $WHEEL_DIR left as it was"
    # .whl/ is this script's own output: the checked set replaces it whole.
    rm -rf "$WHEEL_DIR"
    mv "$tmp" "$WHEEL_DIR"
    trap - EXIT
    log "ready: $(du -sh "$WHEEL_DIR" | cut -f1) in $WHEEL_DIR; carry it: run(carry=[\".whl\"], command=\"bash scripts/device-check.sh run\")"
}

# install SITE PROFILE [--strict]: the wheels into SITE, a fresh target dir; the image's packages (torch)
# stay untouched. Checks where each import comes from, and (profile gpu) that torch sees a CUDA device.
install_wheels() {
    local site=$1 profile=$2 strict=${3:-}
    local wheels
    wheels=$("$PY" "$HELPER" installable "$WHEEL_DIR" $strict) || exit 2
    # shellcheck disable=SC2086  # one wheel path a line, no spaces (the folder's own names)
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" $wheels \
        || die "pip could not install the wheels of $WHEEL_DIR into $site"
    export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
    "$PY" - "$site" "$profile" <<'EOF' || die "the installed wheels do not import as expected, or no GPU (above)"
import os, sys
site = os.path.realpath(sys.argv[1])
import torch, hydra, omegaconf, submitit, ddpbench, hydra_plugins.ddpbench_sweeper
from importlib.metadata import version
inside = lambda m: os.path.realpath(m.__file__).startswith(site + os.sep)
assert inside(ddpbench) and inside(hydra), "ddpbench/hydra were not imported from the target dir"
assert not inside(torch), "torch came from the target dir"
print(f"device-check: python {sys.version.split()[0]}, torch {torch.__version__} (cuda {torch.version.cuda}, "
      f"available {torch.cuda.is_available()}), hydra-core {version('hydra-core')}, ddpbench {ddpbench.__version__} "
      f"from {os.path.dirname(ddpbench.__file__)}")
if sys.argv[2] == "gpu":
    assert torch.cuda.is_available(), "no CUDA device visible to torch"
    print(f"device-check: gpu 0: {torch.cuda.get_device_name(0)}, {torch.cuda.device_count()} visible")
EOF
}

# bounded SECS LOG ARGS...: `python -m ddpbench ARGS` stopped by SIGINT after SECS (the sweep then
# writes the report of what finished), SIGKILL 20 s later. SIGINT is reset to its default first: a
# shell without job control starts background commands with SIGINT ignored, and Python keeps that.
bounded() {
    local secs=$1 logfile=$2
    shift 2
    set +e
    timeout -k 20 -s INT "$secs" "$PY" -c \
        'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execvp(sys.argv[1], sys.argv[1:])' \
        "$PY" -m ddpbench "$@" >"$logfile" 2>&1
    local rc=$?
    set -e
    return $rc
}

# set_default NAME VALUE...: each NAME keeps its value from the environment, else gets VALUE (a whole number)
set_default() {
    while [ $# -gt 0 ]; do
        [ -n "${!1:-}" ] || printf -v "$1" %s "$2"
        [[ ${!1} =~ ^[0-9]+$ ]] || die "$1 must be a whole number, got '${!1}'"
        shift 2
    done
}

# sweep LABEL CAP_S PAIRS ARGS...: PAIRS paired repeats into WORK_DIR/outputs/multirun/LABEL, bounded by
# CAP_S and the run's deadline; always ends with that sweep's summary line (also in WORK_DIR/summary.txt)
sweep() {
    local label=$1 cap=$2 pairs=$3
    shift 3
    local left=$((DEADLINE - SECONDS - 10)) dir=$WORK_DIR/outputs/multirun/$label status rc=0
    local secs=$((cap < left ? cap : left))
    if [ "$pairs" -eq 0 ]; then
        status="not asked (0 pairs)"
    elif [ "$secs" -lt 10 ]; then
        status="skipped: ${left}s left of the run's ${BUDGET_S}s"
    else
        set -- "$@" "repeat=range(1,$((pairs + 1)))" "sweep_name=$label"
        log "$label: up to ${secs}s: python -m ddpbench -m $*"
        (cd "$WORK_DIR" && bounded "$secs" "$WORK_DIR/$label.log" -m "$@") || rc=$?
        case $rc in
            0) status=ok ;;
            124 | 137) status="stopped at its ${secs}s bound" ;;
            130) status=interrupted ;;
            *) status="exit $rc (failed trials?)" ;;
        esac
        tail -n 3 "$WORK_DIR/$label.log" | sed "s/^/  $label| /"
        if [ -d "$dir" ] && [ ! -f "$dir/report.md" ] && compgen -G "$dir/*/trial.json" >/dev/null; then
            (cd "$WORK_DIR" && timeout 60 "$PY" -m ddpbench.report "$dir") >>"$WORK_DIR/$label.log" 2>&1 || true
        fi
    fi
    "$PY" "$HELPER" summary "$label" "$dir" "$status" | tee -a "$WORK_DIR/summary.txt"
}

run_check() {
    local profile=$1 strict=$2
    local start=$SECONDS
    set_default BUDGET_S 510
    local common small
    if [ "$profile" = gpu ]; then
        common=(model=seed_e2e cluster=gpu_single "cluster.precision=${PRECISION:-fp16}" stop=duration)
        # Calibration and A/A on the same model with a smaller data set: start-up ~1 s instead of ~5 s.
        small=(model.num_samples=65536)
        # The reference comparison: 3 pairs x 40 s, each trial ~50-55 s with start-up and teardown; then
        # 2 pairs x 5 s each (~10-12 s a trial). 360 + 60 + 60 s of bounds + ~25 s of install, checks and
        # report: inside BUDGET_S=510, itself ~90 s inside the device tool's 600 s per command.
        set_default REF_PAIRS 3 REF_SEC 40 REF_CAP_S 360
        set_default CAL_PAIRS 2 CAL_SEC 5 CAL_CAP_S 60 INJECT_MS 2
        set_default AA_PAIRS 2 AA_SEC 5 AA_CAP_S 60
    else
        common=(model=tiny cluster=local_cpu cluster.nproc_per_node=1 stop=duration stop.warmup_steps=5)
        small=()
        set_default REF_PAIRS 1 REF_SEC 1 REF_CAP_S 90
        set_default CAL_PAIRS 1 CAL_SEC 1 CAL_CAP_S 60 INJECT_MS 2
        set_default AA_PAIRS 1 AA_SEC 1 AA_CAP_S 60
    fi
    DEADLINE=$((start + BUDGET_S))
    if [ -n "${WORK_DIR:-}" ]; then
        [ ! -e "$WORK_DIR" ] || [ -z "$(ls -A "$WORK_DIR")" ] || die "WORK_DIR $WORK_DIR is not empty; name a new one"
        mkdir -p "$WORK_DIR"
    else
        WORK_DIR=$(mktemp -d "${TMPDIR:-/tmp}/ddpbench-device-check.XXXXXX")
    fi
    WORK_DIR=$(cd "$WORK_DIR" && pwd)
    local out=${OUT:-$WORK_DIR/out}
    mkdir -p "$out"
    [ ! -e "$out/device-check.tar.gz" ] || die "$out/device-check.tar.gz exists; not overwriting it"
    log "profile $profile, work dir $WORK_DIR, results to $out, budget ${BUDGET_S}s"
    install_wheels "$WORK_DIR/site" "$profile" "$strict"
    if [ "$profile" = gpu ]; then
        nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader 2>/dev/null \
            | sed 's/^/device-check: gpu: /' || true
    fi

    # A bad override or a broken install shows here in seconds, not after the first sweep's budget.
    (cd "$WORK_DIR" && "$PY" -m ddpbench --cfg job "${common[@]}" >/dev/null) \
        || die "python -m ddpbench --cfg job ${common[*]} failed (above)"
    : >"$WORK_DIR/summary.txt"

    sweep ref "$REF_CAP_S" "$REF_PAIRS" mode=native,traceml "${common[@]}" "stop.duration_sec=$REF_SEC"
    sweep calibration "$CAL_CAP_S" "$CAL_PAIRS" mode=native,inject "${common[@]}" "${small[@]}" \
        "stop.duration_sec=$CAL_SEC" "inject.step_ms=$INJECT_MS"
    sweep aa "$AA_CAP_S" "$AA_PAIRS" mode=native,native_aa "${common[@]}" "${small[@]}" "stop.duration_sec=$AA_SEC"
    # One report over all three: the A/A noise floor and the calibration beside the tool comparison.
    local sweeps=() s
    for s in ref calibration aa; do
        compgen -G "$WORK_DIR/outputs/multirun/$s/*/trial.json" >/dev/null && sweeps+=("outputs/multirun/$s")
    done
    if [ ${#sweeps[@]} -gt 0 ]; then
        (cd "$WORK_DIR" && timeout 60 "$PY" -m ddpbench.report "${sweeps[@]}" --out combined) >"$WORK_DIR/combined.log" 2>&1 \
            || log "combined report failed (combined.log)"
    fi

    {
        cat "$WHEEL_DIR/SOURCE.txt" 2>/dev/null || true
        echo "ran $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(uname -n), profile $profile, $((SECONDS - start)) s"
        nvidia-smi -L 2>/dev/null || echo "no nvidia-smi"
    } >"$WORK_DIR/environment.txt"
    # Reports, tables, plots, trial records and logs; not the tools' own logs (TraceML's can be large).
    (cd "$WORK_DIR" && find . -path ./site -prune -o -path ./out -prune -o -type f \
        \( -name report.md -o -name analysis.json -o -name results.csv -o -name '*.png' -o -name trial.json \
           -o -name '*.log' -o -name '*.txt' \) -not -path '*/traceml/*' -not -path '*/logs/*' -print \
        | tar -czf "$out/device-check.tar.gz" -T -)
    cp "$WORK_DIR/summary.txt" "$out/summary.txt"
    local size
    size=$(stat -c %s "$out/device-check.tar.gz")
    [ "$size" -lt $((16 * 1024 * 1024)) ] || log "WARNING: the bundle is $size bytes, over the 16 MiB a returned file may have"
    log "bundle $out/device-check.tar.gz ($((size / 1024)) KiB) and $out/summary.txt, after $((SECONDS - start)) s:"
    cat "$WORK_DIR/summary.txt"
    ! grep -q '\[\(skipped\|exit\|stopped\|interrupted\)' "$WORK_DIR/summary.txt"
}

case "${1:-}" in
    prepare) shift; prepare "$@" ;;
    run) [ $# -eq 1 ] || die "run takes no arguments"; run_check gpu --strict ;;
    selftest) [ $# -eq 1 ] || die "selftest takes no arguments"; run_check cpu "" ;;
    *) die "usage: scripts/device-check.sh prepare|run|selftest" ;;
esac
