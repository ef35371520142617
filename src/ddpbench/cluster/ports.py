"""TCP ports for a trial's rendezvous and a tool's aggregator."""

from __future__ import annotations

import hashlib
import socket
from typing import List

#: derived ports fall in [DERIVED_LOW, DERIVED_LOW + DERIVED_SPAN)
DERIVED_LOW = 20000
DERIVED_SPAN = 12000


def free_ports(count: int, host: str = "127.0.0.1") -> List[int]:
    """``count`` distinct ports free on ``host`` right now, chosen by the kernel (sockets held open together)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((host, 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def derived_ports(key: str, count: int, base_port: int = 0) -> List[int]:
    """``count`` consecutive ports every node computes alike from ``key`` (sweep and trial), or from ``base_port``."""
    if base_port:
        return [base_port + i for i in range(count)]
    digest = int(hashlib.sha256(key.encode()).hexdigest(), 16)
    start = DERIVED_LOW + (digest % (DERIVED_SPAN // count)) * count
    return [start + i for i in range(count)]
