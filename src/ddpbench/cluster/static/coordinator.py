"""Node 0's coordinator of a static sweep (the trial it is at, since when), and the other nodes' questions to it.

Before launching trial k, node r asks (:func:`wait_for_owner`) and launches, waits, or fails the trial
unlaunched (docs/multinode.md).
"""

from __future__ import annotations

import errno
import json
import socket
import socketserver
import threading
import time
from typing import Any, Dict, Optional, Tuple

from ddpbench.errors import ConfigError, DdpbenchError

#: a node that asks node 0 this close to the end of node 0's rendezvous window skips the trial
JOIN_MARGIN_S = 5.0
#: seconds between a node's questions to node 0's coordinator
POLL_S = 0.5
#: seconds the coordinator waits for a question's line before it drops the connection
READ_TIMEOUT_S = 5.0
#: connections the coordinator serves at once; more are closed unanswered (the asking node retries)
MAX_CONNECTIONS = 16


class _Handler(socketserver.StreamRequestHandler):
    timeout = READ_TIMEOUT_S  # a client that never sends its line holds its thread this long, no longer

    def handle(self) -> None:  # one JSON line in, one JSON line out
        try:
            self.rfile.readline(4096)
        except OSError:
            return
        coordinator: "Coordinator" = self.server.coordinator  # type: ignore[attr-defined]
        reply = json.dumps(coordinator.position()) + "\n"
        try:
            self.wfile.write(reply.encode())
        except OSError:
            pass


class _Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True
    request_queue_size = 4 * MAX_CONNECTIONS  # connections waiting to be accepted (socketserver's default is 5)

    def __init__(self, address: Tuple[str, int]) -> None:
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.slots.acquire(blocking=False):  # bounded: a flood of connections cannot take every thread
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()


class Coordinator:
    """Node 0's answer to "which trial are you at?": served from a thread of node 0's driver, on node 0's address
    (``host``: ``cluster.master_addr``, the address the other nodes reach it at)."""

    def __init__(self, sweep_name: str, port: int, host: str) -> None:
        self.sweep_name = sweep_name
        self.port = port
        self.host = host
        self._lock = threading.Lock()
        self._trial = -1
        self._opened = time.monotonic()
        try:
            self._server = _Server((host, port))
        except OSError as error:
            if error.errno == errno.EADDRNOTAVAIL:
                raise ConfigError(f"cluster.master_addr={host} is not an address of node 0 (cluster.node_rank=0): "
                                  "give the address the other nodes reach this host at") from None
            raise DdpbenchError(
                f"cluster.kind=static: node 0 cannot listen on its coordinator port {port}: {error.strerror} "
                f"(on {host}; another sweep still running? set cluster.base_port)"
            ) from None
        self._server.coordinator = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self._server.serve_forever, name="ddpbench-coordinator", daemon=True)
        self._thread.start()

    def open(self, trial: int) -> None:
        """Node 0 launches ``trial`` now."""
        with self._lock:
            self._trial = trial
            self._opened = time.monotonic()

    def position(self) -> Dict[str, Any]:
        with self._lock:
            return {"sweep": self.sweep_name, "trial": self._trial, "elapsed_s": time.monotonic() - self._opened}

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


_COORDINATOR: Optional[Coordinator] = None


def coordinator_for(sweep_name: str, port: int, host: str) -> Coordinator:
    """This driver's coordinator (one per process; replaced when the sweep, port or address changes)."""
    global _COORDINATOR
    if _COORDINATOR is not None and (_COORDINATOR.sweep_name, _COORDINATOR.port, _COORDINATOR.host) != (
            sweep_name, port, host):
        _COORDINATOR.close()
        _COORDINATOR = None
    if _COORDINATOR is None:
        _COORDINATOR = Coordinator(sweep_name, port, host)
    return _COORDINATOR


def ask_owner(addr: str, port: int, sweep_name: str, node_rank: int, trial: int, timeout_s: float = 3.0) -> Dict[str, Any]:
    """Node 0's position, or OSError/ValueError when it cannot be had."""
    with socket.create_connection((addr, port), timeout=timeout_s) as sock:
        sock.sendall((json.dumps({"sweep": sweep_name, "node_rank": node_rank, "trial": trial}) + "\n").encode())
        data = b""
        while not data.endswith(b"\n"):
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    reply = json.loads(data.decode())
    if not isinstance(reply, dict):
        raise ValueError("bad coordinator reply")
    return reply


def wait_for_owner(
    addr: str, port: int, sweep_name: str, node_rank: int, trial: int, join_s: float, behind_s: float
) -> Optional[str]:
    """Wait until node 0 is at ``trial``; None = launch, else why this node fails the trial unlaunched.

    ``join_s``: how long node 0 may stay unreachable, and how long after node 0 launched the trial
    it can still be joined. ``behind_s``: how long node 0 may still be busy with earlier trials.
    """
    start = time.monotonic()
    unreachable_since: Optional[float] = start
    last_error = ""
    while True:
        now = time.monotonic()
        try:
            reply = ask_owner(addr, port, sweep_name, node_rank, trial)
        except (OSError, ValueError) as error:
            last_error = str(error)
            if unreachable_since is None:
                unreachable_since = now
            if now - unreachable_since >= join_s:
                return f"node 0's driver ({addr}:{port}) unreachable for {join_s:.0f} s: {last_error}"
            time.sleep(POLL_S)
            continue
        unreachable_since = None
        if reply.get("sweep") != sweep_name:
            return f"node 0's driver at {addr}:{port} runs sweep {reply.get('sweep')!r}, not {sweep_name!r}"
        at, elapsed = int(reply.get("trial", -1)), float(reply.get("elapsed_s", 0.0))
        if at > trial:
            return f"node 0 already left this trial (it is at job {at})"
        if at == trial:
            if elapsed > join_s - JOIN_MARGIN_S:
                return f"node 0 launched this trial {elapsed:.0f} s ago; its rendezvous ({join_s:.0f} s) can no longer be joined"
            return None
        if now - start >= behind_s:
            return f"node 0 did not reach this trial within {behind_s:.0f} s (it is at job {at})"
        time.sleep(POLL_S)


