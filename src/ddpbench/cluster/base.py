"""The backend interface: what a cluster backend decides for one trial, and the registry of backends by name.

A backend subclasses :class:`Backend`, names its ``kind`` and calls :func:`register` at import time;
``cluster.kind: X`` selects it, and for an unknown ``X`` :func:`backend_for` imports the module ``X`` first.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Dict, List, Optional, Protocol

from ddpbench.config import DdpbenchConfig
from ddpbench.errors import ConfigError
from ddpbench.formats.layout import AttemptLayout

#: stands for the node rank in the command of an agent that covers every node (NodePlan.agent_spans_nodes);
#: each node replaces it with its own node rank
NODE_RANK_TOKEN = "@DDPBENCH_NODE_RANK@"


class TrialSlot(Protocol):
    """The trial a backend plans for: its number in the sweep and its job dir."""

    @property
    def job_dir(self) -> Path: ...

    @property
    def job_num(self) -> int: ...


@dataclass(frozen=True)
class NodePlan:
    """What this driver launches for one trial."""

    # node ranks whose agents this driver starts
    node_ranks: List[int]
    # rendezvous host (node 0)
    master_addr: str
    # torch rendezvous port
    master_port: int
    # a tool's aggregator port (TraceML)
    aggregator_port: int
    # whether this driver writes trial.json (node 0's driver)
    owner: bool
    # relaunch once with fresh ports when a port was taken between choosing and binding
    retry_on_port_clash: bool
    # identifies this launch; every node of the trial must get the same one (TraceML's --run-name)
    run_token: str
    # seconds node 0 waits, after its own agent ended, for the other nodes' records
    peer_record_wait_s: float = 30.0
    # where node 0 finds the other nodes' entries: True = their nodes/node<r>.json in the shared job dir;
    # False = inferred from the rank records gathered through the process group (agent wall unknown)
    peer_records: bool = True
    # whether this driver may skip a trial whose trial.json is already ok (None = only the owner)
    resume: Optional[bool] = None
    # set when this driver must not launch the trial (its peers already left it): the trial fails
    skip_reason: Optional[str] = None
    # the one agent of node_ranks=[0] covers every node (Backend.wrap_agent makes it, e.g. an srun step):
    # its command is rendered with node_rank = NODE_RANK_TOKEN; the other nodes write their own
    # nodes/node<r>.json, which node 0 reads as usual
    agent_spans_nodes: bool = False


class Backend:
    """One way of placing a trial's node agents; subclass it in a module of its own and :func:`register` it."""

    #: the ``cluster.kind`` value that selects this backend
    kind: ClassVar[str] = ""

    def validate(self, cfg: DdpbenchConfig) -> None:
        """Raise ConfigError (one line) for a config this backend cannot run; the default accepts all."""

    def prepare_sweep(self, cfg: DdpbenchConfig) -> None:
        """Acquire what the backend holds for a whole sweep before its first trial; raise DdpbenchError if impossible."""

    def plan(self, cfg: DdpbenchConfig, job: TrialSlot, timeout_s: float) -> NodePlan:
        """This driver's plan for trial ``job`` (its ports included); ``timeout_s`` is the trial's watchdog limit."""
        raise NotImplementedError

    def owner_resumed(self, cfg: DdpbenchConfig, plan: NodePlan, job: TrialSlot) -> bool:
        """A non-owner, before anything else: whether the owner resumed the trial (wait, bounded); default False."""
        return False

    def tell_peers(self, cfg: DdpbenchConfig, plan: NodePlan, job: TrialSlot, resumed: bool) -> None:
        """The owner, once the job dir is ready: tell the other nodes it resumed or launches now; default nothing."""

    def wrap_agent(self, cfg: DdpbenchConfig, plan: NodePlan, argv: List[str], attempt: AttemptLayout) -> List[str]:
        """The command that runs agent ``argv`` (e.g. as a step over every node); default ``argv`` itself."""
        return argv

    def rendezvous_env(self, cfg: DdpbenchConfig, run_name: str) -> Dict[str, str]:
        """Environment every node agent of the trial ``run_name`` gets for its rendezvous; default none."""
        return {}

    def workload_args(self, cfg: DdpbenchConfig) -> List[str]:
        """Workload arguments this backend needs (every mode gets them); default none."""
        return []

    def writes_report(self, cfg: DdpbenchConfig) -> bool:
        """Whether this driver writes the sweep's report (only one driver of a sweep does); default yes."""
        return True


_BACKENDS: Dict[str, Backend] = {}


def register(backend: Backend) -> Backend:
    """Make ``backend`` the one ``cluster.kind == backend.kind`` selects; returns it."""
    if not backend.kind:
        raise ValueError(f"{type(backend).__name__} has no kind")
    _BACKENDS[backend.kind] = backend
    return backend


def backend_for(cfg: DdpbenchConfig) -> Backend:
    """The backend ``cfg.cluster.kind`` names, importing a module of your own by that name on first use;
    ConfigError when there is none."""
    kind = cfg.cluster.kind
    if kind not in _BACKENDS:
        try:
            importlib.import_module(kind)
        except ImportError as error:  # no such module; a backend's own import error propagates
            if error.name is None or not kind.startswith(error.name):
                raise
        except (ValueError, TypeError):  # not a module name ("", "a..b")
            pass
    if kind not in _BACKENDS:
        known = ", ".join(sorted(_BACKENDS))
        raise ConfigError(f"cluster.kind={kind!r}: must be {known}, or the module path of your own backend")
    return _BACKENDS[kind]
