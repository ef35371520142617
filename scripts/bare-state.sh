#!/usr/bin/env bash
# bare-state.sh: take back from this machine what ddpbench's setup and tests leave behind, so that the next
# `scripts/setup.sh --test` and test run start as on a machine that never had them (CI runs it first).
#
#   scripts/bare-state.sh          # stop munged, slurmctld, slurmd and Ray; remove the test clusters' folders
#                                  # and locks, pytest's and torch's /tmp folders, pip's, uv's and ddpbench's
#                                  # caches, the /etc/hosts lines slurm-local.sh adds (127.0.0.1 n1, n2)
#   scripts/bare-state.sh --apt    # also purge the Debian packages setup.sh --test installs (slurm-wlm, munge,
#                                  # chromium), so that setup installs them again
#
# Needs root. It stops EVERY munged, slurmctld, slurmd and Ray process on the host (by name), so run it only on a
# machine given to ddpbench's tests; of files it removes only ddpbench's test folders and the caches named above.
set -u -o pipefail
PROG=bare-state
say() { echo "$PROG: $*" >&2; }
die() { echo "$PROG: error: $*" >&2; exit 1; }

apt=0
case "${1:-}" in
    "") ;;
    --apt) apt=1 ;;
    -h | --help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 0 ;;
    *) die "unknown option '$1' (use --apt or nothing)" ;;
esac
[ "$(id -u)" -eq 0 ] || die "must run as root (stops daemons, edits /etc/hosts)"

stop_all() {  # stop_all SIGNAL: signal every daemon of a test cluster on this host
    pkill "-$1" -x slurmstepd 2>/dev/null
    pkill "-$1" -x slurmd 2>/dev/null
    pkill "-$1" -x slurmctld 2>/dev/null
    pkill "-$1" -x munged 2>/dev/null
    pkill "-$1" -f 'ray start --block' 2>/dev/null
    pkill "-$1" -f 'site-packages/ray/' 2>/dev/null
    pkill "-$1" -f '^ray::' 2>/dev/null
    pkill "-$1" -x raylet 2>/dev/null
    pkill "-$1" -x gcs_server 2>/dev/null
}
stop_all TERM
for _ in $(seq 50); do
    pgrep -f '^(slurmctld|slurmd|slurmstepd|/usr/sbin/munged|raylet|gcs_server)( |$)' >/dev/null || break
    sleep 0.1
done
stop_all KILL

# never the checkout this script runs from, nor the folder a command was started in (a clone may live in /tmp)
here=$(cd "$(dirname "$0")/.." && pwd -P)
cwd=$(pwd -P)
for path in /tmp/ddpbench-* /tmp/ddpb-ray-* /tmp/ray /tmp/pytest-of-* /tmp/torchelastic_* /tmp/torchinductor_* \
            /run/ddpbench-munge-* /run/lock/ddpbench-*.lock \
            "$HOME/.cache/pip" "$HOME/.cache/uv" "$HOME/.cache/ddpbench"; do
    [ -e "$path" ] || continue
    real=$(cd "$(dirname "$path")" && pwd -P)/$(basename "$path")
    case "$here/" in "$real"/*) continue ;; esac
    case "$cwd/" in "$real"/*) continue ;; esac
    rm -rf "$path"
done
if grep -qxE '127\.0\.0\.1 n[12]' /etc/hosts 2>/dev/null; then
    # /etc/hosts may be a bind mount: rewrite it in place rather than replace the file
    kept=$(grep -vxE '127\.0\.0\.1 n[12]' /etc/hosts)
    printf '%s\n' "$kept" >/etc/hosts || die "cannot rewrite /etc/hosts"
    say "removed the lines '127.0.0.1 n1' and '127.0.0.1 n2' from /etc/hosts"
fi

if [ "$apt" = 1 ]; then
    installed=$(dpkg-query -W -f='${binary:Package} ${Status}\n' slurm-wlm slurmctld slurmd slurm-client munge \
                chromium 2>/dev/null | awk '$NF == "installed" { print $1 }')
    if [ -n "$installed" ]; then
        # shellcheck disable=SC2086
        DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq $installed >/dev/null 2>&1 \
            || die "apt-get purge $(echo $installed) failed"
        say "purged $(echo $installed)"
    fi
    rm -rf /etc/munge /var/lib/munge /var/log/munge /run/munge
fi
say "done"
