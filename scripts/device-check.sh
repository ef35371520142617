#!/usr/bin/env bash
# device-check.sh: ddpbench's GPU check on a lent device machine, prepared here (docs/gpu.md).
#
#   scripts/device-check.sh prepare    # here: ddpbench's wheel + the wheels the device image lacks -> .whl/, checked
#   scripts/device-check.sh run        # there (device tool `run`, carry [".whl"], timeout_s=480): install into a
#                                      # target dir, time-bounded sweeps on one GPU sized to the time left, results
#                                      # bundled into $OUT
#   scripts/device-check.sh selftest   # here: the same run path on CPU (cluster=local_cpu, tiny model, short trials)
#
# Environment: PYTHON (python3); WHEEL_DIR (<checkout>/.whl); WORK_DIR (a new /tmp folder: sweeps, install target);
# OUT (where the bundle goes; the device tool sets it; default WORK_DIR/out); PRECISION (run: fp16, the reference,
# or bf16); BUDGET_S (run 460, selftest 540: the whole run's wall-clock bound, s). Per sweep (ref, cal, blocks, hf;
# docs/gpu.md): <LABEL>_PAIRS, <LABEL>_SEC (pairs and timed seconds asked for; the plan may shrink them to the time
# left, never grow them, unless <LABEL>_SEC is given), <LABEL>_CAP_S (a fixed bound instead of the planned one);
# BLOCKS_SYNCS (the host-sync patterns of the within-trial sweep, comma-separated); INJECT_MS, DEVICE_MS (the
# calibration's host and device waits per step); EXTEND (1: spend what time is left on more reference pairs).
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python3}
WHEEL_DIR=${WHEEL_DIR:-$REPO/.whl}
HELPER=$REPO/scripts/device_check.py
REPORTER=$REPO/scripts/device_report.py

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
        "$PY" -m ddpbench "$@" >>"$logfile" 2>&1
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

# spec LABEL MIN_SEC MODES [hf]: the plan's spec of a sweep from <LABEL>_PAIRS and <LABEL>_SEC; a <LABEL>_SEC given by
# the caller is kept as it is (its minimum is itself)
spec() {
    local upper=${1^^} min=$2
    local pairs_var=${upper}_PAIRS sec_var=${upper}_SEC
    [ -z "${GIVEN_SEC[$upper]:-}" ] || min=${!sec_var}
    [ "$min" -le "${!sec_var}" ] || min=${!sec_var}
    echo "$1:${!pairs_var}:${!sec_var}:$((min > 0 ? min : 1)):$3${4:+:$4}"
}

# sweep LABEL "MODES" SPEC_INDEX ARGS...: the sweep PLAN[SPEC_INDEX] sized by the plan (or as asked with a fixed
# <LABEL>_CAP_S) into WORK_DIR/outputs/multirun/LABEL, bounded by its cap and the run's deadline; always ends with
# that sweep's summary line (also in WORK_DIR/summary.txt). SUMMARY_ARGS: extra arguments of its summary.
sweep() {
    local label=$1 index=$2
    shift 2
    local upper=${label^^} dir=$WORK_DIR/outputs/multirun/$label status rc=0 pairs sec cap why
    local left=$((DEADLINE - SECONDS - 20))
    local cap_var=${upper}_CAP_S pairs_var=${upper}_PAIRS sec_var=${upper}_SEC
    if [ -n "${!cap_var:-}" ]; then  # a fixed bound: the sizes as asked
        pairs=${!pairs_var} sec=${!sec_var} cap=$((${!cap_var} < left ? ${!cap_var} : left)) why=""
        [ "$pairs" -gt 0 ] || why="not asked (0 pairs)"
        [ "$pairs" -eq 0 ] || [ "$cap" -ge 10 ] || { pairs=0; why="skipped: ${left}s left of the run's ${BUDGET_S}s"; }
    else
        read -r pairs sec cap why < <("$PY" "$REPORTER" plan "$PROFILE" "$left" "$WORK_DIR/outputs/multirun" \
            "${PLAN[@]:$index}" --timings "$WORK_DIR/timings") || die "the plan failed (above)"
    fi
    if [ "$pairs" -eq 0 ]; then
        status=${why:-skipped}
    else
        set -- "$@" "repeat=range(1,$((pairs + 1)))" "sweep_name=$label" "stop.duration_sec=$sec"
        log "$label: $pairs pair(s) x ${sec}s timed, up to ${cap}s: python -m ddpbench -m $*"
        local began=$SECONDS
        (cd "$WORK_DIR" && bounded "$cap" "$WORK_DIR/$label.log" -m "$@") || rc=$?
        mkdir -p "$WORK_DIR/timings" && echo "$((SECONDS - began))" >"$WORK_DIR/timings/$label"
        case $rc in
            0) status=ok ;;
            124 | 137) status="stopped at its ${cap}s bound" ;;
            130) status=interrupted ;;
            *) status="exit $rc (failed trials?)" ;;
        esac
        tail -n 3 "$WORK_DIR/$label.log" | sed "s/^/  $label| /"
        if [ -d "$dir" ] && [ ! -f "$dir/report.md" ] && compgen -G "$dir/*/trial.json" >/dev/null; then
            (cd "$WORK_DIR" && timeout 60 "$PY" -m ddpbench.report "$dir") >>"$WORK_DIR/$label.log" 2>&1 || true
        fi
        LAST_PAIRS=$pairs LAST_SEC=$sec
    fi
    "$PY" "$REPORTER" summary "$label" "$dir" "$status" "${SUMMARY_ARGS[@]}" | tee -a "$WORK_DIR/summary.txt"
}

# device_wait_refused: on CPU a device-side wait is refused in one line; the summary says so
device_wait_refused() {
    local line rc=0
    line=$(cd "$WORK_DIR" && "$PY" -m ddpbench "${COMMON[@]}" mode=inject_device stop.duration_sec=1 \
        "sweep_name=refused" 2>&1 | tail -n 1) || rc=$?
    if [ "$rc" -eq 2 ] && [[ $line == "ddpbench: error: mode=inject_device:"* ]]; then
        echo "$PROG_TAG: calibration device side [not applicable on CPU] refused in one line: ${line#ddpbench: error: }"
    else
        echo "$PROG_TAG: calibration device side [exit $rc] expected a one-line refusal on CPU, got: $line"
    fi | tee -a "$WORK_DIR/summary.txt"
}

# gpu_clock: the device step clock's own cost per step on this GPU (benchmarks/gpu_clock_cost.py; on CPU: nothing)
gpu_clock() {
    local left=$((DEADLINE - SECONDS - 20)) status line rc=0
    if [ "$left" -lt 30 ]; then
        echo "$PROG_TAG: gpu-clock [skipped: ${left}s left]" | tee -a "$WORK_DIR/summary.txt"
        return
    fi
    set +e
    line=$(cd "$WORK_DIR" && timeout -k 5 $((left < 90 ? left : 90)) "$PY" "$REPO/benchmarks/gpu_clock_cost.py" \
        --json "$WORK_DIR/gpu_clock.json" 2>>"$WORK_DIR/gpu_clock.log" | tail -n 1)
    rc=$?
    set -e
    case $rc in 0) status=ok ;; 124 | 137) status="stopped at its bound" ;; *) status="exit $rc" ;; esac
    echo "$PROG_TAG: gpu-clock [$status] $line" | tee -a "$WORK_DIR/summary.txt"
}

run_check() {
    local profile=$1 strict=$2
    local start=$SECONDS
    PROFILE=$profile PROG_TAG=device-check
    declare -gA GIVEN_SEC=()
    local label
    for label in REF CAL BLOCKS HF; do
        local var=${label}_SEC
        [ -z "${!var:-}" ] || GIVEN_SEC[$label]=1
    done
    local syncs modes_cal ref_extra=()
    SUMMARY_ARGS=()
    if [ "$profile" = gpu ]; then
        set_default BUDGET_S 460
        # The reference: TraceML's seed script's job (model=seed_e2e runs its loop by default), 65,536 samples as the
        # seed script's own H200 figure used; every step's times kept (the GPU split per step, the block plot).
        COMMON=(model=seed_e2e cluster=gpu_single "cluster.precision=${PRECISION:-fp16}" stop=duration
                model.num_samples=65536 trial.save_step_times=true)
        set_default REF_PAIRS 3 REF_SEC 5 CAL_PAIRS 1 CAL_SEC 4 BLOCKS_PAIRS 1 BLOCKS_SEC 8 HF_PAIRS 1 HF_SEC 3
        set_default INJECT_MS 2 DEVICE_MS 2 EXTEND 1
        syncs=${BLOCKS_SYNCS:-seed,none}
        modes_cal=native,native_aa,inject,inject_device
        SUMMARY_ARGS=()
    else
        set_default BUDGET_S 540
        COMMON=(model=tiny cluster=local_cpu cluster.nproc_per_node=1 stop=duration stop.warmup_steps=5)
        set_default REF_PAIRS 1 REF_SEC 1 CAL_PAIRS 1 CAL_SEC 1 BLOCKS_PAIRS 1 BLOCKS_SEC 1 HF_PAIRS 1 HF_SEC 1
        set_default INJECT_MS 2 DEVICE_MS 2 EXTEND 0
        syncs=${BLOCKS_SYNCS:-none}
        modes_cal=native,native_aa,inject
        ref_extra=(workload.host_sync=seed)  # model=tiny's default is none: the seed loop on CPU too
    fi
    [[ $syncs =~ ^(none|loss|seed)(,(none|loss|seed))*$ ]] || die "BLOCKS_SYNCS must be patterns none, loss, seed joined by commas, got '$syncs'"
    local block_modes="" one
    for one in ${syncs//,/ }; do block_modes+=${block_modes:++}native+traceml; done
    # The plan, in order of priority: each sweep is sized to the time left after the smallest sizes of those after it.
    PLAN=("$(spec ref 3 native+traceml)" "$(spec cal 2 "${modes_cal//,/+}")" "$(spec blocks 4 "$block_modes")"
          "$(spec hf 2 native+traceml hf)")
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
    (cd "$WORK_DIR" && "$PY" -m ddpbench --cfg job "${COMMON[@]}" >/dev/null) \
        || die "python -m ddpbench --cfg job ${COMMON[*]} failed (above)"
    : >"$WORK_DIR/summary.txt"

    local reference=()
    [ "$profile" = cpu ] || reference=(--reference-ms 1.6)  # the seed script's own figure on the H200, 2026-12-04
    SUMMARY_ARGS=("${reference[@]}")
    LAST_PAIRS=0 LAST_SEC=0
    sweep ref 0 mode=native,traceml "${COMMON[@]}" "${ref_extra[@]}"
    local ref_pairs=$LAST_PAIRS ref_sec=$LAST_SEC
    REF_EXTRA=("${ref_extra[@]}")
    SUMMARY_ARGS=()
    gpu_clock
    sweep cal 1 "mode=$modes_cal" "${COMMON[@]}" "inject.step_ms=$INJECT_MS" "inject.device_step_ms=$DEVICE_MS"
    [ "$profile" = gpu ] || device_wait_refused
    sweep blocks 2 mode=native,traceml "${COMMON[@]}" switching=blocks "workload.host_sync=$syncs"
    sweep hf 3 mode=native,traceml "${COMMON[@]}" workload=hf_trainer
    extend_ref "$ref_pairs" "$ref_sec"

    # One report over all of them: the A/A floor and the calibration beside the tool comparisons.
    local sweeps=() s
    for s in ref cal blocks hf; do
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
        nproc 2>/dev/null | sed 's/^/cpus: /'
    } >"$WORK_DIR/environment.txt"
    # Reports, tables, plots, trial and rank records and logs; not the tools' own logs (TraceML's can be large).
    (cd "$WORK_DIR" && find . -path ./site -prune -o -path ./out -prune -o -type f \
        \( -name report.md -o -name analysis.json -o -name results.csv -o -name '*.png' -o -name trial.json \
           -o -name 'rank-*.json' -o -name gpu_clock.json -o -name '*.log' -o -name '*.txt' \) \
        -not -path '*/traceml/*' -not -path '*/logs/*' -print \
        | tar -czf "$out/device-check.tar.gz" -T -)
    cp "$WORK_DIR/summary.txt" "$out/summary.txt"
    local size
    size=$(stat -c %s "$out/device-check.tar.gz")
    [ "$size" -lt $((16 * 1024 * 1024)) ] || log "WARNING: the bundle is $size bytes, over the 16 MiB a returned file may have"
    log "bundle $out/device-check.tar.gz ($((size / 1024)) KiB) and $out/summary.txt, after $((SECONDS - start)) s:"
    cat "$WORK_DIR/summary.txt"
    ! grep -q '\[\(skipped\|exit\|stopped\|interrupted\)' "$WORK_DIR/summary.txt"
}

# extend_ref PAIRS SEC: with EXTEND=1, the time left after every sweep goes to more reference pairs (the same sweep,
# resumed: its trials so far are kept), and the reference's summary line is printed again as ref+
extend_ref() {
    local pairs=$1 sec=$2 more left
    [ "$EXTEND" = 1 ] && [ "$pairs" -gt 0 ] || return 0
    left=$((DEADLINE - SECONDS - 30))
    read -r more _ _ _ < <("$PY" "$REPORTER" plan "$PROFILE" "$((left * 4 / 5))" "$WORK_DIR/outputs/multirun" \
        "ref:8:$sec:$sec:native+traceml" --timings "$WORK_DIR/timings") || return 0
    [ "$more" -gt 0 ] || return 0
    local cap=$left
    log "ref+: $more more pair(s) of the reference in the ${left}s left"
    local rc=0 status
    (cd "$WORK_DIR" && bounded "$cap" "$WORK_DIR/ref.log" -m mode=native,traceml "${COMMON[@]}" "${REF_EXTRA[@]}" \
        "repeat=range(1,$((pairs + more + 1)))" sweep_name=ref "stop.duration_sec=$sec") || rc=$?
    case $rc in 0) status=ok ;; 124 | 137) status="stopped at its ${cap}s bound" ;; *) status="exit $rc" ;; esac
    SUMMARY_ARGS=()
    [ "$PROFILE" = cpu ] || SUMMARY_ARGS=(--reference-ms 1.6)
    "$PY" "$REPORTER" summary ref+ "$WORK_DIR/outputs/multirun/ref" "$status" "${SUMMARY_ARGS[@]}" \
        | tee -a "$WORK_DIR/summary.txt"
}

case "${1:-}" in
    prepare) shift; prepare "$@" ;;
    run) [ $# -eq 1 ] || die "run takes no arguments"; run_check gpu --strict ;;
    selftest) [ $# -eq 1 ] || die "selftest takes no arguments"; run_check cpu "" ;;
    *) die "usage: scripts/device-check.sh prepare|run|selftest" ;;
esac
