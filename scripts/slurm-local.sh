#!/usr/bin/env bash
# slurm-local.sh: a real 2-node SLURM cluster on this one machine, for ddpbench's tests and for people.
#
#   scripts/slurm-local.sh install          # apt-get install slurm-wlm munge (skipped when present)
#   scripts/slurm-local.sh start  [DIR]     # start munged (if none answers), slurmctld, slurmd n1 + n2
#   scripts/slurm-local.sh status [DIR]     # exit 0 running, 3 stopped, 1 partly running
#   scripts/slurm-local.sh stop   [DIR]     # cancel jobs, stop what DIR's pid files name
#
# DIR defaults to /tmp/ddpbench-slurm. `start` prints `export SLURM_CONF=DIR/slurm.conf` on stdout (all other
# messages go to stderr), so `eval "$(scripts/slurm-local.sh start)"` works; DIR/env.sh holds the same line.
# Needs root (daemons, /etc/hosts). Debian/Ubuntu's slurm-wlm (22.05 tested). See docs/slurm-local.md.
#
# Environment knobs:
#   SLURM_LOCAL_CTLD_PORT  slurmctld port             (default 6817; auto: the first free of 6817, 6830-6899)
#   SLURM_LOCAL_NODE_PORT  first of two slurmd ports  (default 17001; n2 gets +1; auto: the first free pair
#                          from 17001 to 17199)
#   With auto, the ports are chosen and bound under one host-wide lock (PORT_LOCK): two starts at the same
#   moment never choose the same ports.
#   SLURM_LOCAL_TIMEOUT    seconds to wait for each start/stop phase (default 30)
#   SLURM_LOCAL_MUNGE_SOCKET  the munged socket the cluster uses (default /run/munge/munge.socket.2); another
#                          path gives the cluster a munged of its own (its pid, seed and log files beside it)
set -u -o pipefail

PROG=slurm-local
DEFAULT_DIR=/tmp/ddpbench-slurm
NODES=(n1 n2)
CTLD_PORT=${SLURM_LOCAL_CTLD_PORT:-6817}
NODE_PORT=${SLURM_LOCAL_NODE_PORT:-17001}
TIMEOUT=${SLURM_LOCAL_TIMEOUT:-30}
DEFAULT_MUNGE_SOCKET=/run/munge/munge.socket.2
MUNGE_SOCKET=${SLURM_LOCAL_MUNGE_SOCKET:-$DEFAULT_MUNGE_SOCKET}
if [ "$MUNGE_SOCKET" = "$DEFAULT_MUNGE_SOCKET" ]; then
    MUNGE_PIDFILE=/run/munge/munged.pid
    MUNGED_FILES=()
else
    MUNGE_PIDFILE=$MUNGE_SOCKET.pid
    MUNGED_FILES=("--socket=$MUNGE_SOCKET" "--pid-file=$MUNGE_PIDFILE" "--seed-file=$MUNGE_SOCKET.seed"
                  "--log-file=$MUNGE_SOCKET.log")
fi
# Held while one start decides whether to start munged and starts its daemons, and while one stop decides
# whether to stop munged: two starts at the same moment would otherwise both find no munged and start one each.
MUNGE_LOCK=$MUNGE_SOCKET.slurm-local.lock
# Held by every start from choosing or checking its ports until its daemons listen on them (taken after
# MUNGE_LOCK, never before it): a port found free is still free when the daemon binds it.
PORT_LOCK=/run/lock/ddpbench-slurm-local.ports.lock
[ -d /run/lock ] || PORT_LOCK=/tmp/ddpbench-slurm-local.ports.lock

say() { echo "$PROG: $*" >&2; }
die() { echo "$PROG: error: $*" >&2; exit 1; }

usage() {
    sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

need_root() { [ "${EUID:-$(id -u)}" -eq 0 ] || die "must run as root (starts daemons, edits /etc/hosts); try: sudo $0 $*"; }

need_packages() {
    local missing=() c
    for c in slurmctld slurmd sbatch sinfo scontrol scancel munged munge unmunge; do
        command -v "$c" >/dev/null 2>&1 || [ -x "/usr/sbin/$c" ] || missing+=("$c")
    done
    [ ${#missing[@]} -eq 0 ] || die "missing ${missing[*]}: slurm-wlm/munge not installed; run: $0 install"
}

resolve_dir() {
    local d=${1:-$DEFAULT_DIR}
    case "$d" in *[[:space:]]*) die "DIR must not contain whitespace (slurm.conf paths): '$d'" ;; esac
    case "$d" in /*) ;; *) d="$(pwd)/$d" ;; esac
    DIR=${d%/}
    CONF="$DIR/slurm.conf"
    RUN="$DIR/run"
    LOG="$DIR/log"
}

now() { date +%s.%N; }
elapsed_since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
deadline_passed() { awk -v d="$1" -v n="$(now)" 'BEGIN { exit !(n > d) }'; }
deadline_in() { awk -v s="$1" -v n="$(now)" 'BEGIN { printf "%.3f", n + s }'; }

# A pid is alive when it exists, is not a zombie (PID 1 here may not reap), and its command matches.
pid_alive() {
    local pid=$1 want=$2 stat state comm
    [ -n "$pid" ] && [ -r "/proc/$pid/stat" ] || return 1
    stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 1
    state=$(echo "${stat##*) }" | cut -d' ' -f1)
    [ "$state" != Z ] && [ "$state" != X ] || return 1
    comm=$(cat "/proc/$pid/comm" 2>/dev/null) || return 1
    [ "$comm" = "$want" ]
}

pidfile_pid() { [ -s "$1" ] && tr -dc '0-9' <"$1"; }

# daemon_list: "name comm pidfile" for every daemon this DIR manages (munged only if we started it).
daemon_list() {
    local n
    for n in "${NODES[@]}"; do echo "slurmd-$n slurmd $RUN/slurmd-$n.pid"; done
    echo "slurmctld slurmctld $RUN/slurmctld.pid"
    [ -s "$RUN/munged.ours" ] && echo "munged munged $RUN/munged.ours"
}

# count_running: prints "<running> <total>" over the slurm daemons (munged excluded).
count_running() {
    local name comm pf running=0 total=0
    while read -r name comm pf; do
        [ "$name" = munged ] && continue
        total=$((total + 1))
        pid_alive "$(pidfile_pid "$pf")" "$comm" && running=$((running + 1))
    done < <(daemon_list)
    echo "$running $total"
}

munge_ok() { timeout 5 munge -S "$MUNGE_SOCKET" -n 2>/dev/null | timeout 5 unmunge -S "$MUNGE_SOCKET" >/dev/null 2>&1; }

# lock_munge: take MUNGE_LOCK on fd 9 (bounded; a no-op when this process holds it); unlock_munge: let it go.
# Every daemon is started with fds 8 and 9 closed, or it would hold the locks for its whole life.
MUNGE_LOCKED=0
lock_munge() {
    [ "$MUNGE_LOCKED" = 1 ] && return 0
    mkdir -p "$(dirname "$MUNGE_LOCK")" || die "cannot create $(dirname "$MUNGE_LOCK")"
    exec 9>>"$MUNGE_LOCK" || die "cannot open $MUNGE_LOCK"
    flock -w $((2 * TIMEOUT)) 9 || die "another slurm-local start or stop held $MUNGE_LOCK for over $((2 * TIMEOUT))s"
    MUNGE_LOCKED=1
}
unlock_munge() { [ "$MUNGE_LOCKED" = 1 ] && exec 9>&-; MUNGE_LOCKED=0; }

# conf_socket CONF: the munged socket a slurm.conf names (AuthInfo=socket=...), else the default one.
conf_socket() {
    local s
    s=$(sed -n 's/^AuthInfo=.*socket=\([^,]*\).*/\1/p' "$1" 2>/dev/null | head -n 1)
    echo "${s:-$DEFAULT_MUNGE_SOCKET}"
}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# port_taken P: any TCP socket on this host has local port P (listening, connected or closing), so a daemon
# could not bind it; without ss(8), whether anything listens on it.
port_taken() {
    if command -v ss >/dev/null 2>&1; then
        [ -n "$(ss -Htan "( sport = :$1 )" 2>/dev/null)" ]
    else
        port_in_use "$1"
    fi
}

lock_ports() {
    exec 8>>"$PORT_LOCK" || die "cannot open $PORT_LOCK"
    flock -w $((2 * TIMEOUT)) 8 || die "another slurm-local start held $PORT_LOCK for over $((2 * TIMEOUT))s"
}
unlock_ports() { exec 8>&-; }

# choose_ports: CTLD_PORT and NODE_PORT, where they are auto, the first free ones (call with PORT_LOCK held);
# a fixed port that is taken is an error.
choose_ports() {
    local p
    if [ "$CTLD_PORT" = auto ]; then
        CTLD_PORT=
        for p in 6817 $(seq 6830 6899); do port_taken "$p" || { CTLD_PORT=$p; break; }; done
        [ -n "$CTLD_PORT" ] || die "no free slurmctld port among 6817, 6830-6899"
    fi
    if [ "$NODE_PORT" = auto ]; then
        NODE_PORT=
        for p in $(seq 17001 2 17199); do
            port_taken "$p" || port_taken $((p + 1)) || { NODE_PORT=$p; break; }
        done
        [ -n "$NODE_PORT" ] || die "no two free consecutive slurmd ports from 17001 to 17199"
    fi
    for p in "$CTLD_PORT" "$NODE_PORT" $((NODE_PORT + 1)); do
        port_taken "$p" && die "port $p is in use (another SLURM cluster? stop it, or set SLURM_LOCAL_CTLD_PORT / SLURM_LOCAL_NODE_PORT, e.g. to auto)"
    done
}

# wait_listening P...: until a daemon listens on each port (bounded), so the ports are taken before PORT_LOCK goes.
wait_listening() {
    local until p; until=$(deadline_in "$TIMEOUT")
    for p in "$@"; do
        until port_in_use "$p"; do
            deadline_passed "$until" && { cmd_stop_quiet; die "nothing listens on port $p ${TIMEOUT}s after the daemons started (see $LOG/)"; }
            sleep 0.05
        done
    done
}

node_states() { SLURM_CONF="$CONF" timeout 5 sinfo -h -N -o '%N %T' 2>/dev/null | sort -u; }

print_env() {
    echo "export SLURM_CONF=$CONF" >"$DIR/env.sh"
    echo "export SLURM_CONF=$CONF"
}

cmd_install() {
    need_root install
    if command -v sbatch >/dev/null && command -v slurmctld >/dev/null && command -v slurmd >/dev/null \
        && [ -x /usr/sbin/munged ] && command -v munge >/dev/null; then
        say "slurm-wlm and munge already installed (slurm-wlm $(dpkg-query -W -f='${Version}' slurm-wlm 2>/dev/null || echo '?'))"
        return 0
    fi
    command -v apt-get >/dev/null || die "no apt-get: install SLURM (slurmctld, slurmd, sbatch) and munge with your package manager"
    local t0; t0=$(now)
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >&2 || die "apt-get update failed"
    apt-get install -y -q slurm-wlm munge >&2 || die "apt-get install slurm-wlm munge failed"
    say "installed slurm-wlm and munge in $(elapsed_since "$t0") s"
}

start_munge() {  # call with MUNGE_LOCK held
    local until; until=$(deadline_in "$TIMEOUT")
    if ! munge_ok && pid_alive "$(pidfile_pid "$MUNGE_PIDFILE")" munged; then
        say "munged (pid $(pidfile_pid "$MUNGE_PIDFILE")) runs but does not answer yet: waiting for it"
        until munge_ok; do
            deadline_passed "$until" && die "munged (pid $(pidfile_pid "$MUNGE_PIDFILE")) did not answer on $MUNGE_SOCKET within ${TIMEOUT}s"
            sleep 0.1
        done
    fi
    if munge_ok; then
        say "munged already answers on $MUNGE_SOCKET; using it (stop will leave it running)"
        rm -f "$RUN/munged.ours"
        return 0
    fi
    if [ ! -s /etc/munge/munge.key ]; then
        say "creating /etc/munge/munge.key"
        mkdir -p /etc/munge
        mungekey --create --keyfile=/etc/munge/munge.key >&2 2>&1 \
            || dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 2>/dev/null \
            || die "cannot create /etc/munge/munge.key"
        chown munge:munge /etc/munge /etc/munge/munge.key && chmod 700 /etc/munge && chmod 600 /etc/munge/munge.key
    fi
    local d
    for d in "$(dirname "$MUNGE_SOCKET")" /var/log/munge /var/lib/munge; do
        mkdir -p "$d" && chown munge:munge "$d" || die "cannot prepare $d for the munge user"
    done
    chmod 755 "$(dirname "$MUNGE_SOCKET")"
    # munged refuses to run as root with Debian's key ("Keyfile is insecure"): run it as munge.
    runuser -u munge -- /usr/sbin/munged "${MUNGED_FILES[@]}" </dev/null >"$LOG/munged.stderr" 2>&1 8>&- 9>&- \
        || die "munged failed to start: $(tail -n 1 "$LOG/munged.stderr" 2>/dev/null)"
    until munge_ok; do
        deadline_passed "$until" && die "munged did not answer on $MUNGE_SOCKET within ${TIMEOUT}s (see its log)"
        sleep 0.1
    done
    local pid; pid=$(pidfile_pid "$MUNGE_PIDFILE")
    pid_alive "$pid" munged || die "munged answers but $MUNGE_PIDFILE does not name it"
    echo "$pid" >"$RUN/munged.ours"
}

ensure_hosts() {
    local n
    for n in "${NODES[@]}"; do
        if ! getent hosts "$n" >/dev/null 2>&1; then
            [ -s /etc/hosts ] && [ -n "$(tail -c 1 /etc/hosts)" ] && echo >>/etc/hosts
            echo "127.0.0.1 $n" >>/etc/hosts || die "cannot add '127.0.0.1 $n' to /etc/hosts"
            say "added '127.0.0.1 $n' to /etc/hosts"
        fi
    done
}

write_conf() {
    local host cpus mem_total mem_node
    host=$(hostname -s)
    cpus=$(nproc)
    mem_total=$(slurmd -C 2>/dev/null | tr ' ' '\n' | sed -n 's/^RealMemory=//p' | head -n 1)
    [ -n "$mem_total" ] || die "slurmd -C reported no RealMemory"
    mem_node=$((mem_total / ${#NODES[@]}))
    [ "$mem_node" -ge 1 ] || mem_node=1
    cat >"$CONF" <<EOF
# Written by scripts/slurm-local.sh: a 2-node SLURM cluster on one host (two slurmd, multiple-slurmd style).
ClusterName=ddpbench
SlurmctldHost=${host}(127.0.0.1)
SlurmctldPort=${CTLD_PORT}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
$([ "$MUNGE_SOCKET" = "$DEFAULT_MUNGE_SOCKET" ] || echo "AuthInfo=socket=$MUNGE_SOCKET")
StateSaveLocation=${DIR}/state
SlurmdSpoolDir=${DIR}/spool/%n
SlurmctldPidFile=${RUN}/slurmctld.pid
SlurmdPidFile=${RUN}/slurmd-%n.pid
SlurmctldLogFile=${LOG}/slurmctld.log
SlurmdLogFile=${LOG}/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
# No slurmdbd: sacct does not work. Ended jobs stay visible to 'scontrol show job' for MinJobAge seconds,
# and every ended job is appended to JobCompLoc (one line each, with JobState).
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=${LOG}/jobcomp.txt
MinJobAge=600
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
# scancel: SIGTERM, then SIGKILL after KillWait seconds (default 30).
KillWait=5
InactiveLimit=0
NodeName=n[1-2] NodeHostname=${host} NodeAddr=127.0.0.1 Port=[${NODE_PORT}-$((NODE_PORT + 1))] CPUs=${cpus} RealMemory=${mem_node} State=UNKNOWN
PartitionName=debug Nodes=n[1-2] Default=YES MaxTime=INFINITE State=UP
EOF
}

start_daemon() { # name comm pidfile cmd...
    local name=$1 comm=$2 pf=$3; shift 3
    rm -f "$pf"
    SLURM_CONF="$CONF" "$@" </dev/null >"$LOG/$name.stderr" 2>&1 8>&- 9>&- \
        || { cmd_stop_quiet; die "$name failed to start: $(tail -n 1 "$LOG/$name.stderr" 2>/dev/null) (see $LOG/$name.log)"; }
    local until; until=$(deadline_in "$TIMEOUT")
    until pid_alive "$(pidfile_pid "$pf")" "$comm"; do
        if deadline_passed "$until"; then
            cmd_stop_quiet
            die "$name wrote no live pid file within ${TIMEOUT}s (see $LOG/$name.log)"
        fi
        sleep 0.05
    done
}

cmd_start() {
    need_root start
    need_packages
    local t0; t0=$(now)
    read -r running total < <(count_running)
    if [ "$running" -eq "$total" ] && [ -n "$(node_states)" ]; then
        say "already running in $DIR: $(node_states | tr '\n' ' ')"
        print_env
        return 0
    fi
    if [ "$running" -gt 0 ]; then
        say "partly running in $DIR ($running of $total daemons): stopping it first"
        cmd_stop_quiet
    fi
    lock_munge
    lock_ports
    choose_ports
    mkdir -p "$DIR" "$RUN" "$LOG" "$DIR/state" || die "cannot create $DIR"
    local n
    for n in "${NODES[@]}"; do mkdir -p "$DIR/spool/$n"; done
    chmod 755 "$DIR"
    ensure_hosts
    write_conf
    start_munge
    # -c: start with no jobs and no node state from a previous run in this DIR.
    start_daemon slurmctld slurmctld "$RUN/slurmctld.pid" slurmctld -c -f "$CONF"
    for n in "${NODES[@]}"; do
        start_daemon "slurmd-$n" slurmd "$RUN/slurmd-$n.pid" slurmd -f "$CONF" -N "$n"
    done
    wait_listening "$CTLD_PORT" "$NODE_PORT" $((NODE_PORT + 1))
    unlock_ports
    unlock_munge  # its daemons run: a stop elsewhere now sees them using munged
    local until states; until=$(deadline_in "$TIMEOUT")
    while :; do
        states=$(node_states)
        [ "$(echo "$states" | grep -c ' idle$')" -eq ${#NODES[@]} ] && break
        if deadline_passed "$until"; then
            cmd_stop_quiet
            die "nodes not idle within ${TIMEOUT}s (last: $(echo "$states" | tr '\n' ' ')); see $LOG/"
        fi
        sleep 0.1
    done
    say "started in $(elapsed_since "$t0") s: $(echo "$states" | tr '\n' ' ')(partition debug, $(nproc) CPUs/node; logs in $LOG)"
    print_env
}

# other_slurm_pids: live slurmctld/slurmd processes on this host, not named by this DIR's pid files, whose
# slurm.conf (their -f, else /etc/slurm/slurm.conf) uses this cluster's munged socket; with the default socket,
# slurmstepd processes too (their slurm.conf cannot be told).
other_slurm_pids() {
    local ours=" " name comm pf p c conf
    while read -r name comm pf; do ours+="$(pidfile_pid "$pf") "; done < <(daemon_list)
    for p in /proc/[0-9]*; do
        p=${p#/proc/}
        c=$(cat "/proc/$p/comm" 2>/dev/null) || continue
        case "$c" in slurmctld | slurmd | slurmstepd) ;; *) continue ;; esac
        case "$ours" in *" $p "*) continue ;; esac
        if [ "$c" = slurmstepd ]; then
            [ "$MUNGE_SOCKET" = "$DEFAULT_MUNGE_SOCKET" ] || continue
        else
            conf=$(tr '\0' '\n' <"/proc/$p/cmdline" 2>/dev/null | sed -n '/^-f$/{n;p;q}')
            [ "$(conf_socket "${conf:-/etc/slurm/slurm.conf}")" = "$MUNGE_SOCKET" ] || continue
        fi
        pid_alive "$p" "$c" && echo "$p"
    done
}

# hand_over_munged PID: let another cluster of this script that uses the same munged (found via its slurmctld's
# `-f DIR/slurm.conf`) own the munged we started, so that its stop ends munged.
hand_over_munged() {
    local p conf other
    for p in $(other_slurm_pids); do
        [ "$(cat "/proc/$p/comm" 2>/dev/null)" = slurmctld ] || continue
        conf=$(tr '\0' '\n' <"/proc/$p/cmdline" 2>/dev/null | sed -n '/^-f$/{n;p;q}')
        other=$(dirname "$conf" 2>/dev/null)
        if [ -n "$conf" ] && [ -d "$other/run" ] && [ "$other" != "$DIR" ]; then
            echo "$1" >"$other/run/munged.ours" && say "munged now belongs to the cluster in $other" && return 0
        fi
    done
}

# Cancel all jobs of this cluster (so no slurmstepd outlives slurmd), then stop the daemons by pid file.
do_stop() {
    local verbose=$1 stopped=0 name comm pf pid until
    if pid_alive "$(pidfile_pid "$RUN/slurmctld.pid")" slurmctld; then
        if [ -n "$(SLURM_CONF="$CONF" timeout 5 squeue -h -o %i 2>/dev/null)" ]; then
            SLURM_CONF="$CONF" timeout 5 scancel -p debug >/dev/null 2>&1
            until=$(deadline_in 15)
            while [ -n "$(SLURM_CONF="$CONF" timeout 5 squeue -h -o %i 2>/dev/null)" ]; do
                deadline_passed "$until" && { say "warning: jobs still listed after scancel; stopping anyway"; break; }
                sleep 0.2
            done
        fi
    fi
    while read -r name comm pf; do
        pid=$(pidfile_pid "$pf")
        [ "$name" = munged ] && lock_munge  # no start elsewhere takes this munged up while it is stopped
        if [ "$name" = munged ] && pid_alive "$pid" "$comm" && [ -n "$(other_slurm_pids)" ]; then
            say "leaving munged (pid $pid) running: other SLURM daemons on this host use it ($(other_slurm_pids | tr '\n' ' '))"
            hand_over_munged "$pid"
            rm -f "$pf"
            continue
        fi
        if pid_alive "$pid" "$comm"; then
            kill -TERM "$pid" 2>/dev/null
            until=$(deadline_in "$TIMEOUT")
            while pid_alive "$pid" "$comm"; do
                if deadline_passed "$until"; then
                    say "warning: $name (pid $pid) ignored SIGTERM for ${TIMEOUT}s; sending SIGKILL"
                    kill -KILL "$pid" 2>/dev/null
                    sleep 0.5
                    break
                fi
                sleep 0.05
            done
            pid_alive "$pid" "$comm" && die "$name (pid $pid) is still running"
            stopped=$((stopped + 1))
            [ "$verbose" = 1 ] && say "stopped $name (pid $pid)"
        fi
        rm -f "$pf"
    done < <(daemon_list)
    [ "$verbose" = 1 ] && [ "$stopped" -eq 0 ] && say "not running in $DIR"
    return 0
}
cmd_stop_quiet() { do_stop 0; }

cmd_stop() {
    need_root stop
    [ -d "$DIR" ] || { say "not running ($DIR does not exist)"; return 0; }
    do_stop 1
}

cmd_status() {
    local name comm pf pid running=0 total=0
    if [ ! -d "$RUN" ]; then say "stopped ($DIR does not exist)"; return 3; fi
    while read -r name comm pf; do
        pid=$(pidfile_pid "$pf")
        if pid_alive "$pid" "$comm"; then
            say "$name: running (pid $pid)"
            [ "$name" != munged ] && running=$((running + 1))
        else
            say "$name: stopped"
        fi
        [ "$name" != munged ] && total=$((total + 1))
    done < <(daemon_list)
    [ -s "$RUN/munged.ours" ] || { munge_ok && say "munged: shared (not started by this script)" || say "munged: not answering"; }
    if [ "$running" -eq 0 ]; then say "stopped"; return 3; fi
    SLURM_CONF="$CONF" timeout 5 sinfo -N >&2 2>&1 || say "sinfo failed"
    if [ "$running" -lt "$total" ]; then say "partly running ($running of $total daemons)"; return 1; fi
    echo "export SLURM_CONF=$CONF"
    return 0
}

[ $# -ge 1 ] || usage
cmd=$1; shift
[ $# -le 1 ] || usage
case "$cmd" in
    install) [ $# -eq 0 ] || usage; cmd_install ;;
    start) resolve_dir "${1:-}"; cmd_start ;;
    stop) resolve_dir "${1:-}"; cmd_stop ;;
    status) resolve_dir "${1:-}"; cmd_status ;;
    -h | --help | help) usage ;;
    *) echo "$PROG: error: unknown command '$cmd' (install|start|stop|status)" >&2; exit 2 ;;
esac
