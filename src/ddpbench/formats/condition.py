"""Which config keys make a trial's condition (what the trials of a pair share: every chosen or swept key but the
ones below), and how a trial's job folder is named from them. Every reading of an override's key goes through
:func:`parse_overrides` (Hydra's own parser).
"""

from __future__ import annotations

import functools
import hashlib
import re
from typing import TYPE_CHECKING, List, Optional, Sequence, Tuple

from ddpbench.errors import ConfigError

if TYPE_CHECKING:
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import Override

#: keys the sweep driver sets on every job itself: where the job sits in its sweep, not what it measures
SWEEPER_KEYS: Tuple[str, ...] = ("pair_position", "sweep_name")
#: keys that differ between the drivers of one multi-node trial (each node runs its own driver)
NODE_KEYS: Tuple[str, ...] = ("cluster.node_rank",)
#: the sweep's tool versions (mode -> specs; the sweeper makes one arm per spec) and the one spec a trial's arm runs
VERSIONS_KEY, VERSION_KEY = "versions", "version"
#: keys that vary inside a condition: the arm compared (mode, and its tool version) and the pair's repeat
ARM_KEYS: Tuple[str, ...] = ("mode", "repeat", VERSION_KEY)
#: keys that never name a trial's job folder (Hydra's ``override_dirname`` leaves them out; the job dir
#: names an arm's version through its mode, ``mode=traceml==0.4.2``)
NOT_IN_JOB_DIR: Tuple[str, ...] = SWEEPER_KEYS + NODE_KEYS + (VERSIONS_KEY, VERSION_KEY)
#: keys a trial's ``config_hash`` leaves out: where it sits in its sweep, the sweep's list of versions (adding a
#: version to a sweep must not re-run the trials it already has) and the report's regression threshold
NOT_IN_HASH: Tuple[str, ...] = SWEEPER_KEYS + (VERSIONS_KEY, "regression_pct")
#: keys that are not part of a condition
NON_CONDITION_KEYS: Tuple[str, ...] = ARM_KEYS + NOT_IN_JOB_DIR


@functools.lru_cache(maxsize=1)
def _override_parser() -> "OverridesParser":
    """Hydra's override parser, built once per process."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return OverridesParser.create()


def parse_overrides(overrides: Sequence[str]) -> List[Override]:
    """Hydra's own reading of command-line overrides, one each; ConfigError names the first that is not one."""
    from hydra.errors import HydraException

    parser = _override_parser()
    parsed = []
    for text in overrides:
        try:
            parsed.append(parser.parse_override(text))
        except HydraException:  # the lexer's and the parser's errors alike
            raise ConfigError(f"{text!r} is not a key=value override") from None
    return parsed


def override_key(override: str) -> str:
    """The key of a Hydra override ``key=value`` (without a leading ``+``, ``++`` or ``~``)."""
    return parse_overrides([override])[0].key_or_group


def is_condition_override(override: str) -> bool:
    """Whether the override ``key=value`` is part of the job's condition."""
    return override_key(override) not in NON_CONDITION_KEYS


_PLAIN_VERSION = re.compile(r"^v?\d+(\.\d+)*([._-]?[A-Za-z0-9+!]+)*$")


def is_plain_version(spec: str) -> bool:
    """Whether a version spec is a bare release number (``0.4.2``, ``1.0rc1``) rather than a requirement or path."""
    return bool(_PLAIN_VERSION.match(spec.strip())) and "/" not in spec


def arm_name(mode: str, spec: Optional[str]) -> str:
    """The name of the arm that runs mode ``mode``'s tool at version ``spec``: ``traceml==0.4.2``; the mode itself
    for None (the sweep's own install), ``traceml[traceml-ai<0.5]`` for a requirement, the last path component for a
    wheel file, a source tree or ``path@ref`` (``traceml@checkout@v2``)."""
    if spec is None or str(spec).strip() == "":
        return mode
    text = str(spec).strip()
    if is_plain_version(text):
        return f"{mode}=={text.lstrip('v')}"
    if any(op in text for op in "<>=!~") and "/" not in text:
        return f"{mode}[{text.replace(' ', '')}]"
    return f"{mode}@{text.rstrip('/').rsplit('/', 1)[-1]}"


def base_mode(arm: str) -> str:
    """The mode an arm name (:func:`arm_name`) runs: ``traceml==0.4.2`` -> ``traceml``."""
    return re.split(r"==|\[|@", arm, maxsplit=1)[0]


#: longest job folder name (bytes) :func:`job_dirname` keeps; longer ones end in a hash (NAME_MAX is 255)
JOB_DIRNAME_MAX = 200


def job_dirname(override_dirname: str, version: Optional[str] = None) -> str:
    """A job folder name from Hydra's ``override_dirname`` (the resolver ``ddpbench_dirname``): one path component
    (``/`` as ``%2F``, ``%`` as ``%25``; cut to :data:`JOB_DIRNAME_MAX` with a hash of the whole), an arm at a tool
    ``version`` named by its mode: ``mode=traceml==0.4.2``."""
    if version is not None:
        override_dirname = re.sub(r"(^|,)mode=([^,]+)(?=,|$)",
                                  lambda m: f"{m.group(1)}mode={arm_name(m.group(2), str(version))}", override_dirname)
    name = override_dirname.replace("%", "%25").replace("/", "%2F")
    encoded = name.encode("utf-8")
    if len(encoded) <= JOB_DIRNAME_MAX:
        return name
    digest = hashlib.sha256(encoded).hexdigest()[:16]
    return encoded[: JOB_DIRNAME_MAX - 17].decode("utf-8", "ignore") + "-" + digest
