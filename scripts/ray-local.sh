#!/usr/bin/env bash
# ray-local.sh: a real 2-node Ray cluster on this one machine, for ddpbench's tests and for people.
#
#   scripts/ray-local.sh start  [DIR]     # start a head (node0) and a second node (node1)
#   scripts/ray-local.sh status [DIR]     # exit 0 running, 3 stopped, 1 partly running
#   scripts/ray-local.sh stop   [DIR]     # stop what DIR's pid files name (never other Ray clusters)
#   scripts/ray-local.sh stop-node N [DIR]  # stop node N only (1 = the second node): a lost node
#   scripts/ray-local.sh start-node 1 [DIR] # start the second node again (the head must be running)
#
# DIR defaults to /tmp/ddpbench-ray. Each node is one `ray start --block` in a process group of its own,
# with its own temp dir (DIR/node<N>), ports, CPUs and a custom resource `node<N>` = 1, so a placement group
# that asks for node1 really lands on the second raylet. `start` prints `export RAY_ADDRESS=HOST:PORT` on
# stdout (all other messages go to stderr), so `eval "$(scripts/ray-local.sh start)"` works; DIR/env.sh
# holds the same line. Needs `ray` on PATH or RAY_LOCAL_RAY. See docs/ray.md.
#
# Environment knobs:
#   RAY_LOCAL_PORT     the head's GCS port; node N's own ports start at PORT + 10 + 20*N (default 6390);
#                      auto: the first of 6390, 6490, ..., 7290 whose 50 ports are free, chosen under a host-wide
#                      lock held until both nodes are up (two starts never choose the same ports) and kept in
#                      DIR/port for the other commands
#   RAY_LOCAL_CPUS     logical CPUs each node offers (default 2)
#   RAY_LOCAL_GPUS     GPUs the head offers (default 0; the second node offers none)
#   RAY_LOCAL_TIMEOUT  seconds to wait for each start/stop phase (default 60)
#   RAY_LOCAL_RAY      the ray executable (default: the one next to python3, else `ray` on PATH)
set -u -o pipefail

PROG=ray-local
DEFAULT_DIR=/tmp/ddpbench-ray
PORT=${RAY_LOCAL_PORT:-6390}
CPUS=${RAY_LOCAL_CPUS:-2}
GPUS=${RAY_LOCAL_GPUS:-0}
TIMEOUT=${RAY_LOCAL_TIMEOUT:-60}
HOST=127.0.0.1
# the object store is the smallest Ray allows: ddpbench moves no data through it
OBJECT_STORE_BYTES=80000000

say() { echo "$PROG: $*" >&2; }
die() { echo "$PROG: error: $*" >&2; exit 1; }

usage() {
    sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

ray_bin() {
    if [ -n "${RAY_LOCAL_RAY:-}" ]; then echo "$RAY_LOCAL_RAY"; return; fi
    local py
    py=$(command -v python3 || true)
    if [ -n "$py" ] && [ -x "$(dirname "$py")/ray" ]; then echo "$(dirname "$py")/ray"; return; fi
    command -v ray || die "no ray executable (pip install 'ddpbench[ray]', or set RAY_LOCAL_RAY)"
}

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

PORT_LOCK=/run/lock/ddpbench-ray-local.ports.lock
[ -d /run/lock ] || PORT_LOCK=/tmp/ddpbench-ray-local.ports.lock

ports_free() {  # no TCP socket on this host has a local port from $1 to $2 (without ss(8): nothing listens on $1)
    if command -v ss >/dev/null 2>&1; then
        [ -z "$(ss -Htan "( sport >= :$1 and sport <= :$2 )" 2>/dev/null)" ]
    else
        ! (exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null
    fi
}

# resolve_port ACTION: PORT=auto becomes a number: for start, the first free block (PORT_LOCK taken on fd 8 and
# held until this process ends); for the other commands, the one DIR/port kept.
resolve_port() {
    [ "$PORT" = auto ] || return 0
    if [ "$1" = start ]; then
        exec 8>>"$PORT_LOCK" || die "cannot open $PORT_LOCK"
        flock -w $((3 * TIMEOUT)) 8 || die "another ray-local start held $PORT_LOCK for over $((3 * TIMEOUT)) s"
        local p
        for p in $(seq 6390 100 7290); do
            ports_free "$p" $((p + 49)) && { PORT=$p; break; }
        done
        [ "$PORT" != auto ] || die "no 50 free ports from any of 6390, 6490, ..., 7290"
        mkdir -p "$DIR" && echo "$PORT" >"$DIR/port"
    else
        [ -s "$DIR/port" ] || die "RAY_LOCAL_PORT=auto but $DIR/port does not say which port the cluster took"
        PORT=$(cat "$DIR/port")
    fi
}

node_ports() {  # the ports of node $1, as ray start options
    local base=$((PORT + 10 + 20 * $1))
    echo "--node-manager-port=$base --object-manager-port=$((base + 1)) --metrics-export-port=$((base + 2))" \
         "--dashboard-agent-listen-port=$((base + 3)) --dashboard-agent-grpc-port=$((base + 4))" \
         "--runtime-env-agent-port=$((base + 5)) --min-worker-port=$((base + 6)) --max-worker-port=$((base + 19))"
}

start_node() {  # start node $1 in DIR; returns at once (the node registers in the background)
    local n=$1 ray=$2 role
    local tmp="$DIR/node$n"
    mkdir -p "$tmp"
    if [ "$n" -eq 0 ]; then
        role="--head --port=$PORT --include-dashboard=false --num-gpus=$GPUS"
    else
        role="--address=$HOST:$PORT --num-gpus=0"
    fi
    # shellcheck disable=SC2046,SC2086
    setsid "$ray" start --block $role --node-ip-address=$HOST --num-cpus="$CPUS" \
        --resources="{\"node$n\": 1}" --temp-dir="$tmp" --object-store-memory=$OBJECT_STORE_BYTES \
        --disable-usage-stats $(node_ports "$n") >"$DIR/node$n.log" 2>&1 </dev/null 8>&- &
    echo $! >"$DIR/node$n.pid"
}

nodes_alive() {  # how many nodes the cluster itself reports alive (0 when it does not answer)
    RAY_ADDRESS="$HOST:$PORT" timeout 30 "$(dirname "$(ray_bin)")/python" - <<'EOF' 2>/dev/null || echo 0
import ray
ray.init(address="auto", logging_level="ERROR", log_to_driver=False)
print(sum(1 for node in ray.nodes() if node["Alive"]))
EOF
}

node_ready() {  # "ALIVE OFFERED": nodes alive, and 1 when the scheduler offers node $1's resource node<N>, else 0
    RAY_ADDRESS="$HOST:$PORT" N="$1" timeout 30 "$(dirname "$(ray_bin)")/python" - <<'EOF' 2>/dev/null || echo "0 0"
import os
import ray
ray.init(address="auto", logging_level="ERROR", log_to_driver=False)
alive = sum(1 for node in ray.nodes() if node["Alive"])
offered = ray.available_resources().get(f"node{os.environ['N']}", 0) >= 1  # the view a placement group waits on
print(alive, int(offered))
EOF
}

wait_nodes() {  # wait until the cluster reports $1 nodes alive and its scheduler offers node $1-1's resources
    local want=$1 last=$(($1 - 1)) deadline=$((SECONDS + TIMEOUT)) have=0 offered=0
    while [ $SECONDS -lt $deadline ]; do
        alive "$DIR/node$last.pid" || die "node$last exited while starting: $(tail -n1 "$DIR/node$last.log")"
        read -r have offered < <(node_ready "$last" | tail -n1)
        [ "$have" = "$want" ] && [ "$offered" = 1 ] && return 0
        sleep 1
    done
    die "the cluster reports $have of $want node(s) alive and node$last's resources $([ "$offered" = 1 ] || echo "not ")offered after ${TIMEOUT} s (see $DIR/node*.log)"
}

stop_node() {  # SIGTERM node $1's process group, then SIGKILL what is left of it
    local n=$1 pidfile="$DIR/node$1.pid" pid deadline
    [ -f "$pidfile" ] || return 0
    pid=$(cat "$pidfile")
    kill -TERM -- "-$pid" 2>/dev/null
    deadline=$((SECONDS + 3))
    while kill -0 -- "-$pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.5; done
    kill -KILL -- "-$pid" 2>/dev/null
    rm -f "$pidfile"
    say "node$n stopped"
}

cmd_start() {
    local ray
    ray=$(ray_bin)
    mkdir -p "$DIR"
    if alive "$DIR/node0.pid" || alive "$DIR/node1.pid"; then
        die "a cluster from $DIR is already running (scripts/ray-local.sh stop $DIR first)"
    fi
    start_node 0 "$ray"
    wait_nodes 1
    start_node 1 "$ray"
    wait_nodes 2
    echo "export RAY_ADDRESS=$HOST:$PORT" >"$DIR/env.sh"
    say "2 nodes up at $HOST:$PORT (resources node0, node1; $CPUS CPU(s) each), logs in $DIR"
    cat "$DIR/env.sh"
}

cmd_status() {
    local up=0 n
    for n in 0 1; do alive "$DIR/node$n.pid" && up=$((up + 1)); done
    case $up in
        2) say "running: $(nodes_alive | tail -n1) node(s) alive at $HOST:$PORT"; exit 0 ;;
        0) say "stopped"; exit 3 ;;
        *) say "partly running ($up of 2 node processes)"; exit 1 ;;
    esac
}

cmd_stop() {
    stop_node 1
    stop_node 0
}

[ $# -ge 1 ] || usage
action=$1
shift
case $action in
    start) DIR=${1:-$DEFAULT_DIR}; resolve_port start; cmd_start ;;
    status) DIR=${1:-$DEFAULT_DIR}; resolve_port status; cmd_status ;;
    stop) DIR=${1:-$DEFAULT_DIR}; cmd_stop ;;
    stop-node) [ $# -ge 1 ] || usage; N=$1; DIR=${2:-$DEFAULT_DIR}; stop_node "$N" ;;
    start-node) [ "${1:-}" = 1 ] || usage; DIR=${2:-$DEFAULT_DIR}; resolve_port start-node
        alive "$DIR/node0.pid" || die "the head of $DIR is not running (scripts/ray-local.sh start $DIR)"
        alive "$DIR/node1.pid" && die "node1 of $DIR is already running"
        start_node 1 "$(ray_bin)"; wait_nodes 2; say "node1 up" ;;
    *) usage ;;
esac
