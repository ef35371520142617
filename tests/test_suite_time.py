"""benchmarks/suite_time.py's pure parts: the kernel's accounting records, /proc/stat's busy time, and the
census by kind (synthetic records: the code under test only reads them)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import suite_time  # noqa: E402
from suite_time import ACCT_V3, Ended, busy_ticks, classify, comp_t, read_accounting  # noqa: E402


def _record(pid: int, ppid: int, started: int, utime: int, stime: int, name: bytes, version: bytes = b"\x03") -> bytes:
    return ACCT_V3.pack(b"\x00", version, 0, 0, 0, 0, pid, ppid, started, 0.0, utime, stime, 0, 0, 0, 0, 0, 0, name)


def test_comp_t_decodes_mantissa_and_base_8_exponent() -> None:
    assert comp_t(361) == 361
    assert comp_t((1 << 13) | 1000) == 8000  # exponent 1: x8
    assert comp_t((2 << 13) | 0x1FFF) == 0x1FFF * 64


def test_accounting_file_gives_cpu_seconds_and_skips_other_versions() -> None:
    data = _record(10, 1, 1_700_000_000, 361, 53, b"python3") + _record(11, 10, 1_700_000_001, 5, 0, b"git", b"\x02") \
        + _record(12, 10, 1_700_000_002, (1 << 13) | 100, 20, b"pt_elastic")
    ended = read_accounting(data + b"\x00" * 10)  # a torn last record is ignored
    assert ended == [Ended(10, 1, 1_700_000_000, 4.14, "python3"), Ended(12, 10, 1_700_000_002, 8.2, "pt_elastic")]


def test_busy_time_leaves_out_idle_iowait_and_steal() -> None:
    stat = "cpu  100 5 20 1000 30 2 3 40 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n"
    assert busy_ticks(stat) == 100 + 5 + 20 + 2 + 3


def test_census_finds_ranks_by_their_parent_and_matches_reused_pids_by_start() -> None:
    t = 1_700_000_000
    ended = [
        Ended(100, 1, t, 2.0, "pytest"),
        Ended(200, 100, t + 5, 4.0, "jemalloc_bg_thd"),  # a driver, named after its last thread
        Ended(300, 200, t + 6, 2.0, "pt_elastic"),
        Ended(301, 300, t + 7, 4.5, "gloo_tcp_loop"),  # a rank: the launcher's child
        Ended(302, 300, t + 7, 4.4, "python3"),
        Ended(400, 200, t + 9, 0.1, "git"),  # never sampled: the driver's
        Ended(500, 1, t + 9, 0.2, "pt_elastic"),  # never sampled: its name says launcher
        Ended(600, 1, t + 9, 0.3, "sh"),  # never sampled, no owner: other
        Ended(700, 1, t + 100, 1.0, "python3"),  # pid 700 reused: only the later command line matches
    ]
    commands = {
        (100, t + 0.2): "/usr/bin/python3 -m pytest -q -n 3",
        (200, t + 5.1): "/usr/bin/python3 -m ddpbench -m mode=native,traceml repeat=1",
        (300, t + 6.3): "/usr/bin/python3 -m torch.distributed.run --nproc-per-node=2 ddp_mlp.py",
        (301, t + 7.0): "/usr/bin/python3 -u ddp_mlp.py --steps 3",
        (302, t + 7.0): "/usr/bin/python3 -u ddp_mlp.py --steps 3",
        (700, t + 10.0): "/usr/bin/python3 -m ddpbench -m mode=native",
        (700, t + 100.4): "/usr/bin/python3 -m pip install x",
    }
    kinds = classify(ended, commands)
    pids = {kind: sorted(e.pid for e in group) for kind, group in kinds.items() if group}
    assert pids == {"pytest": [100], "ddpbench drivers": [200, 400], "launchers": [300, 500],
                    "training ranks": [301, 302], "environment builds": [700], "other": [600]}
    assert list(kinds) == list(suite_time.KINDS)
