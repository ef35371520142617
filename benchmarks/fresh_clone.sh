#!/usr/bin/env bash
# fresh_clone.sh: the README's test command from fresh clones, each on a machine state as bare as a new user's.
#
#   benchmarks/fresh_clone.sh [-n RUNS] [--keep-apt] [--out FILE] [REPO]
#
# Each run (as root):
#   1. scripts/bare-state.sh --apt: no munged, slurmd or Ray running; no test folders, locks or caches (pip, uv,
#      ddpbench); no n1/n2 lines in /etc/hosts; slurm-wlm, munge and chromium purged (--keep-apt: left installed);
#   2. in a mount namespace of its own (unshare), empty folders over /tmp, ~/.cache, /run/munge and /run/lock and a
#      copy of /etc/hosts: nothing another run or the person running this left there is seen;
#   3. `git clone REPO` (default: this checkout's HEAD), `python3 -m venv`, then the README's two steps, timed:
#      `bash scripts/setup.sh --test` and `python3 -m pytest -q -n 3` (with --durations=25 added through
#      PYTEST_ADDOPTS, for the log only);
#   4. one line in FILE (default /var/tmp/ddpbench-fresh/results.tsv): when, commit, set-up, pytest and whole
#      seconds, pytest's summary, the machine's busy and steal CPU seconds over the run.
# The logs of each run stay in /var/tmp/ddpbench-fresh/<start time>/ (setup.log, pytest.log).
set -u -o pipefail
PROG=fresh_clone
die() { echo "$PROG: error: $*" >&2; exit 1; }

here=$(cd "$(dirname "$0")/.." && pwd)
runs=1 apt=--apt out=/var/tmp/ddpbench-fresh/results.tsv repo=$here
while [ $# -gt 0 ]; do
    case "$1" in
        -n) [ $# -ge 2 ] && [ "$2" -ge 1 ] 2>/dev/null || die "-n needs a count of runs"; runs=$2; shift 2 ;;
        --keep-apt) apt=; shift ;;
        --out) [ $# -ge 2 ] || die "--out needs a file"; out=$2; shift 2 ;;
        -*) die "unknown option '$1'" ;;
        *) repo=$1; shift ;;
    esac
done
[ "$(id -u)" -eq 0 ] || die "must run as root (purges packages, starts daemons, mounts)"
git -C "$repo" rev-parse --short HEAD >/dev/null || die "$repo is not a git checkout"
mkdir -p "$(dirname "$out")"
[ -s "$out" ] || printf 'start_utc\tcommit\tsetup_s\tpytest_s\twhole_s\tsummary\tbusy_cpu_s\tsteal_cpu_s\n' >"$out"

cpu_ticks() {  # "<busy> <steal>" in clock ticks since boot (/proc/stat: busy leaves out idle, iowait and steal)
    awk '/^cpu / { print $2 + $3 + $4 + $7 + $8, $9 }' /proc/stat
}

for _ in $(seq "$runs"); do
    work=/var/tmp/ddpbench-fresh/$(date -u +%Y%m%dT%H%M%S)
    mkdir -p "$work"/{tmp,cache,run-munge,run-lock}
    bash "$here/scripts/bare-state.sh" $apt || die "bare-state.sh failed"
    grep -vxE '127\.0\.0\.1 n[12]' /etc/hosts >"$work/hosts"
    chmod 1777 "$work/tmp"
    start=$(date -u +%Y-%m-%dT%H:%M:%SZ)
    read -r busy0 steal0 < <(cpu_ticks)
    unshare --mount --propagation private env -u CI -u VIRTUAL_ENV -u PYTEST_ADDOPTS -u SLURM_CONF -u RAY_ADDRESS \
        REPO="$repo" WORK="$work" bash -c '
        set -u
        mkdir -p /run/munge /run/lock "$HOME/.cache"
        mount --bind "$WORK/tmp" /tmp && mount --bind "$WORK/cache" "$HOME/.cache" \
            && mount --bind "$WORK/run-munge" /run/munge && mount --bind "$WORK/run-lock" /run/lock \
            && mount --bind "$WORK/hosts" /etc/hosts || { echo "mounts failed" >"$WORK/result"; exit 1; }
        git clone -q "$REPO" /tmp/ddpbench && cd /tmp/ddpbench || exit 1
        t0=$(date +%s.%N)
        python3 -m venv .venv && . .venv/bin/activate
        bash scripts/setup.sh --test >"$WORK/setup.log" 2>&1; setup_rc=$?
        t1=$(date +%s.%N)
        summary="setup failed ($setup_rc)"
        if [ "$setup_rc" -eq 0 ]; then
            PYTEST_ADDOPTS=--durations=25 python3 -m pytest -q -n 3 >"$WORK/pytest.log" 2>&1
            summary=$(grep -E "^=* ?[0-9]+ (passed|failed|error)" "$WORK/pytest.log" | tail -n 1 | tr -d "=" \
                      | sed "s/^ *//; s/ *$//")
        fi
        t2=$(date +%s.%N)
        printf "%s\t%.0f\t%.0f\t%.0f\t%s\n" "$(git rev-parse --short HEAD)" "$(echo "$t1 - $t0" | bc)" \
            "$(echo "$t2 - $t1" | bc)" "$(echo "$t2 - $t0" | bc)" "${summary:-no summary}" >"$WORK/result"
    '
    read -r busy1 steal1 < <(cpu_ticks)
    hz=$(getconf CLK_TCK)
    IFS=$'\t' read -r commit setup_s pytest_s whole_s summary <"$work/result"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$start" "$commit" "$setup_s" "$pytest_s" "$whole_s" "$summary" \
        $(((busy1 - busy0) / hz)) $(((steal1 - steal0) / hz)) | tee -a "$out"
    rm -rf "$work/tmp" "$work/cache"  # the clone and its environment: gigabytes; the logs stay
done
bash "$here/scripts/bare-state.sh" >/dev/null 2>&1
