"""Which worker of a ``pytest -n N`` run gets which tests: one worker per shared resource.

pytest-xdist's own ``--dist loadgroup`` passes a test's group from the worker to the controller by
appending ``@group`` to the test's node id; pytest 9.2 computes node ids from a structured id, so that
append no longer takes effect and every group is silently spread over all workers (an open pytest-xdist
bug). The suite then started one SLURM cluster per worker, the clusters raced for one port, and the
tests of the losers errored.

The suite does not depend on that side channel. Each worker writes the groups it computed at collection
(``{node id: group}``, the same on every worker) to a file the controller named before it started them
(:data:`GROUPS_FILE_ENV`), and the controller's scheduler, :class:`ResourceGroupScheduling`, reads it
once every worker has collected: a group is one unit of work, handed to one worker; a test without a
group is a unit of its own. A group file that is missing or does not cover the collection ends the run
with one line instead of running the tests unguarded.
"""

from __future__ import annotations

import json
import os
import tempfile
import uuid
from pathlib import Path
from typing import Mapping

import pytest
from xdist.scheduler import LoadScopeScheduling

#: the environment variable that names the group file; set by the controller for its workers
GROUPS_FILE_ENV = "DDPBENCH_TEST_GROUPS_FILE"


def new_groups_file() -> Path:
    """A fresh path for one run's group file (not created yet), named in :data:`GROUPS_FILE_ENV`."""
    path = Path(tempfile.gettempdir()) / f"ddpbench-test-groups-{os.getpid()}-{uuid.uuid4().hex[:8]}.json"
    os.environ[GROUPS_FILE_ENV] = str(path)
    return path


def write_groups(groups: Mapping[str, str]) -> None:
    """Write this worker's ``{node id: group}`` where the controller will read it (atomically: every worker
    writes the same content, and the controller must never read a half-written file)."""
    path = Path(os.environ[GROUPS_FILE_ENV])
    part = path.with_name(f"{path.name}.{os.getpid()}.part")
    part.write_text(json.dumps(dict(groups), sort_keys=True))
    os.replace(part, path)


def _without_xdist_suffix(nodeid: str) -> str:
    """The node id without the ``@group`` an older pytest lets xdist append (an explicit ``xdist_group`` mark)."""
    return nodeid.rsplit("@", 1)[0] if nodeid.rfind("@") > nodeid.rfind("]") else nodeid


class ResourceGroupScheduling(LoadScopeScheduling):
    """xdist's scope scheduling with the suite's groups as scopes: a group's tests run on one worker, in the
    order collected (the workers sort them: tests/conftest.py), and a worker takes its next unit when it is
    nearly out of work."""

    def __init__(self, config: pytest.Config, log: object, groups_file: Path) -> None:
        super().__init__(config, log)  # type: ignore[arg-type]
        self.groups_file = groups_file
        self.groups: dict[str, str] = {}

    def schedule(self) -> None:
        if self.collection is None:  # the first call: every worker has collected and written its groups
            self.groups = self._read_groups()
        super().schedule()

    def _read_groups(self) -> dict[str, str]:
        try:
            groups = json.loads(self.groups_file.read_text())
        except (OSError, ValueError) as exc:
            pytest.exit(f"tests: the workers' groups were not written to {self.groups_file} ({exc}): the resources "
                        "they need would be started once per worker", returncode=3)
        collected = {_without_xdist_suffix(nodeid) for nodeid in next(iter(self.registered_collections.values()))}
        unknown = sorted(set(groups) - collected)
        if unknown:
            pytest.exit(f"tests: the workers' groups name {len(unknown)} test(s) the workers did not collect "
                        f"(first: {unknown[0]})", returncode=3)
        return dict(groups)

    def _split_scope(self, nodeid: str) -> str:
        base = _without_xdist_suffix(nodeid)
        group = self.groups.get(base)
        return f"group:{group}" if group is not None else base
