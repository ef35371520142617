"""Where a trial's node agents run (cluster.*), with the SLURM and Ray backends' own settings."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from omegaconf import MISSING

from ddpbench.choices import Device, DistBackend, Precision


@dataclass
class SlurmConfig:
    """SLURM settings of a ``kind: slurm`` cluster; ``hydra/launcher=ddpbench`` reads them."""

    # sbatch --partition (null = the cluster's default partition)
    partition: Optional[str] = None
    # GPUs per node (null = none requested)
    gpus_per_node: Optional[int] = None
    # CPUs for the one task per node (null = SLURM's default)
    cpus_per_task: Optional[int] = None
    # memory per node, GB (null = SLURM's default)
    mem_gb: Optional[int] = None
    # job time limit, minutes (null = from the trial timeout: ceil((timeout + wait_margin_s) / 60))
    timeout_min: Optional[int] = None
    # shell lines run in the sbatch script before srun (module load, venv activation, exports)
    setup: List[str] = field(default_factory=list)
    # extra sbatch options, e.g. {constraint: t4, exclusive: true}
    additional_parameters: Dict[str, Any] = field(default_factory=dict)
    # the submitter waits at most trial timeout + this many seconds for a running job
    wait_margin_s: float = 120.0
    # the submitter waits at most this many seconds for a job to leave the queue (PENDING)
    queue_timeout_s: float = 3600.0
    # seconds between the submitter's checks of a job
    poll_s: float = 1.0
    # seconds node 0 waits, after its own agent ended, for the other nodes' records
    peer_record_wait_s: float = 60.0
    # true: ONE job runs the whole sweep on the same nodes, one `srun` step per trial, instead of one job per
    # trial: both arms of every pair run on the same machines (ddpbench.cluster.slurm.steps)
    one_allocation: bool = False


@dataclass
class RayConfig:
    """Ray settings of a ``kind: ray`` cluster (ddpbench.cluster.ray.backend, docs/ray.md)."""

    # the running cluster's GCS address HOST:PORT; auto = $RAY_ADDRESS, else the one `ray start` left here
    address: str = "auto"
    # logical CPUs each node's placement-group bundle asks for (null = cluster.nproc_per_node)
    cpus_per_node: Optional[float] = None
    # extra resources per node rank, e.g. [{node0: 1}, {node1: 1}] for scripts/ray-local.sh's cluster
    node_resources: List[Dict[str, Any]] = field(default_factory=list)
    # seconds a trial waits for its placement group (nodes with the resources) before it fails
    placement_timeout_s: float = 60.0
    # seconds the driver waits for the cluster's address to answer before the sweep stops (exit 2)
    connect_timeout_s: float = 10.0


@dataclass
class ClusterConfig:
    """Where and how a trial's node agents run."""

    # label used in reports
    name: str = MISSING
    # the backend that places node agents: local, slurm, static (one driver per node), or your own's module path
    kind: str = "local"
    # nodes (torchrun agents) per trial
    nnodes: int = 1
    # ranks per node
    nproc_per_node: int = 2
    device: Device = Device.cpu
    backend: DistBackend = DistBackend.gloo
    precision: Precision = Precision.fp32
    # torch threads per rank (OMP_NUM_THREADS); 0 = leave unset
    threads_per_rank: int = 1
    # rendezvous address; local backend uses loopback
    master_addr: str = "127.0.0.1"
    # this driver's node rank (static backend: each node runs its own driver)
    node_rank: int = 0
    # static backend: the drivers' coordinator port; trial k rendezvouses on base_port + 1 + 2*k, its tool's
    # aggregator on base_port + 2 + 2*k (0 = derived from the sweep name)
    base_port: int = 0
    # static backend: seconds a node waits at a trial for its peers (and node 0 for a peer's record) before failing it
    rendezvous_timeout_s: float = 60.0
    # static backend: whether every node sees the same sweep dir (NFS...); false: the ranks send their records to
    # rank 0 through the process group (other nodes' agent walls unknown) and TraceML modes are refused
    shared_dir: bool = True
    # slurm backend settings (ignored elsewhere)
    slurm: SlurmConfig = field(default_factory=SlurmConfig)
    # ray backend settings (ignored elsewhere)
    ray: RayConfig = field(default_factory=RayConfig)
    # pin each rank to CPUs: auto | none | a CPU list for the ranks in order, "0-3" or [0,1] (workload.affinity)
    cpu_affinity: Any = "none"
