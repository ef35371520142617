"""Earlier attempts of a trial in its job dir: reuse an ok one (resume), set aside any other."""

import shutil
from pathlib import Path
from typing import Any, Dict, Optional

from ddpbench.formats.trial_record import TRIAL_FILE, read_trial_record

__all__ = ["ATTEMPT_ENTRIES", "TRIAL_FILE", "previous_ok", "set_aside_previous_attempt"]

#: what one attempt leaves in its job dir; moved together into previous/<n>/
ATTEMPT_ENTRIES = (TRIAL_FILE, "logs", "metrics", "traceml", "nodes")


def previous_ok(job_dir: Path, config_hash: str) -> Optional[Dict[str, Any]]:
    """The trial record in ``job_dir`` if it is ok and was made from the same resolved config, else None."""
    previous, _ = read_trial_record(job_dir / TRIAL_FILE)
    if previous is not None and previous.get("status") == "ok" and previous.get("config_hash") == config_hash:
        return previous
    return None


def set_aside_previous_attempt(job_dir: Path) -> Optional[Path]:
    """Move an earlier attempt's results into ``previous/<n>/`` so nothing is overwritten; return that dir."""
    present = [name for name in ATTEMPT_ENTRIES if (job_dir / name).exists()]
    if not present:
        return None
    attempt = 1
    while (job_dir / "previous" / str(attempt)).exists():
        attempt += 1
    target = job_dir / "previous" / str(attempt)
    target.mkdir(parents=True)
    for name in present:
        shutil.move(str(job_dir / name), str(target / name))
    return target
