"""DDP MLP trainer: the one workload every ddpbench trial runs, natively or under TraceML.

Run it as a file (``torchrun src/ddpbench/workload/ddp_mlp.py ...``,
``traceml run src/ddpbench/workload/ddp_mlp.py --args ...``) or as a module
(``python -m ddpbench.workload.ddp_mlp ...``; without torchrun it runs as a world
of one). See ``docs/workload.md`` for the argument table and the design notes;
the rank JSON it writes is :mod:`ddpbench.formats.rank_record`.

Design, briefly:

* **Stops.** ``--steps N`` runs exactly N timed steps on every rank (no clock, no
  collective). ``--duration-sec D`` stops on time, and by default the ranks agree
  on *when*: every ``--stop-check-every K`` timed steps each rank computes a local
  flag (its own clock says D has passed) and the ranks all-reduce MAX it, at the
  same step numbers everywhere, so all ranks leave the loop after the same step
  and no rank enters a collective a peer skips. The flag travels over a gloo
  group on CPU tensors (the default group when the backend is gloo, a second
  gloo group when it is nccl), so the check never synchronises the GPU.
  ``--no-sync-stop`` keeps the reference's flaw (each rank checks its own clock
  after every step and leaves alone) only so tests can show the hang.
* **Step numbering.** Warmup steps (``--warmup-steps``) are not timed and not
  counted: timed steps are numbered 1, 2, ... and the fault knobs
  ``--fault-crash-at-step N``/``--fault-hang-at-step N`` fire at the *start* of
  timed step N (after N-1 timed steps completed). ``--stop-check-every K``
  checks after timed steps K, 2K, ...
* **Faults** apply to ``--fault-rank R`` when given, else to every rank.
  Clock skew makes the targeted rank's stop clock read S seconds ahead. A crash
  is ``os._exit(3)``: no cleanup, no rank JSON. A hang sleeps forever (peers then
  block in the next gradient all-reduce until ``--collective-timeout-sec``).
* **Calibration injection.** ``--inject-step-ms X`` adds X ms to every timed step
  on every rank by *busy-waiting* on ``time.perf_counter``: sleeping would add
  the scheduler's wake-up latency and timer slack (tens of µs to ms, varying
  with load), so the added cost would not be the known X. ``--inject-startup-sec``
  and ``--inject-teardown-sec`` *sleep*: they are seconds long, where wake-up
  jitter is negligible, and sleeping leaves the CPU to the peers.
* **Timing.** Host ``time.perf_counter`` at step boundaries, no device
  synchronisation inside the timed loop; on CUDA one synchronize before the
  first timed step and one after the last. Each step's duration runs from its
  start boundary to the next one, so it includes the data fetch, the stop check
  and the injected cost. Epoch timestamps come from ``time.time``.
* **TraceML.** Under ``traceml run`` (``TRACEML_SESSION_ID`` set and
  ``TRACEML_DISABLED`` != "1") the script imports ``traceml_ai``, calls
  ``traceml_ai.init(mode=...)`` (``--traceml-mode`` or env
  ``DDPBENCH_TRACEML_MODE``: ``auto`` patches forward/backward/optimizer/
  dataloader, ``manual`` = ``trace_step`` only) and wraps every step, *warmup
  included*, in ``traceml_ai.trace_step(model)`` with the model before DDP
  wrapping. TraceML therefore sees ``warmup_steps + timed_steps`` steps. The
  batch fetch and the stop check lie outside ``trace_step``; the injected step
  cost inside. Otherwise ``traceml_ai`` is never imported.

Torch is imported only after the arguments are parsed, so bad input fails in a
fraction of a second with a one-line error and exit status 2, before any
process group exists.
"""

from __future__ import annotations

import time

_PROCESS_START_EPOCH: float = time.time()

import argparse  # noqa: E402
import contextlib  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import socket  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
from typing import TYPE_CHECKING, Any, Callable, ContextManager, Iterator, NoReturn, Sequence  # noqa: E402

if TYPE_CHECKING:  # pragma: no cover
    import torch

TRACEML_MODE_ENV = "DDPBENCH_TRACEML_MODE"
"""Environment variable selecting the TraceML init mode (``auto`` or ``manual``)."""

DEFAULT_STOP_CHECK_EVERY = 50
"""Default K of ``--stop-check-every``: measured by benchmarks/stop_check_cost.py (docs/workload.md)."""

CRASH_EXIT_CODE = 3
"""Exit status of a rank killed by ``--fault-crash-at-step``."""


# --------------------------------------------------------------------------- arguments


def _positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _finite_float(text: str) -> float:
    """argparse type: a finite float."""
    value = float(text)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be finite, got {text}")
    return value


def _positive_float(text: str) -> float:
    """argparse type: a finite float > 0."""
    value = _finite_float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {value}")
    return value


def _non_negative_float(text: str) -> float:
    """argparse type: a finite float >= 0."""
    value = _finite_float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


# argparse names the type function in its message ("invalid _positive_int value"):
# give them readable names.
for _fn, _name in (
    (_positive_int, "positive int"),
    (_non_negative_int, "non-negative int"),
    (_finite_float, "float"),
    (_positive_float, "positive float"),
    (_non_negative_float, "non-negative float"),
):
    _fn.__name__ = _name


class _OneLineParser(argparse.ArgumentParser):
    """ArgumentParser whose errors are one line on stderr (no usage block), exit status 2."""

    def error(self, message: str) -> "NoReturn":  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """The workload's command line (see docs/workload.md for the table)."""
    p = _OneLineParser(
        prog="ddp_mlp",
        description="DDP MLP trainer for ddpbench (runs under torchrun or traceml run).",
    )
    stop = p.add_argument_group("stop (exactly one of --steps/--duration-sec)")
    stop.add_argument("--steps", type=_positive_int, default=None, help="timed steps per rank")
    stop.add_argument("--duration-sec", type=_positive_float, default=None, help="timed seconds (lockstep stop)")
    stop.add_argument("--warmup-steps", type=_non_negative_int, default=5, help="untimed steps before timing (default 5)")
    stop.add_argument("--stop-check-every", type=_positive_int, default=DEFAULT_STOP_CHECK_EVERY,
                      help=f"duration mode: all-reduce the stop flag every K timed steps (default {DEFAULT_STOP_CHECK_EVERY})")
    stop.add_argument("--no-sync-stop", action="store_true",
                      help="duration mode: each rank stops on its own clock (reference behaviour; can hang)")

    model = p.add_argument_group("model and data")
    model.add_argument("--batch-size", type=_positive_int, default=256, help="per-rank batch (samples)")
    model.add_argument("--input-dim", type=_positive_int, default=4096)
    model.add_argument("--hidden-dim", type=_positive_int, default=4096)
    model.add_argument("--hidden-layers", type=_positive_int, default=4, help="Linear+GELU blocks before the output Linear")
    model.add_argument("--num-classes", type=_positive_int, default=1000)
    model.add_argument("--num-samples", type=_positive_int, default=262144, help="synthetic dataset size (all ranks)")
    model.add_argument("--lr", type=_positive_float, default=1e-3, help="AdamW learning rate")
    model.add_argument("--seed", type=int, default=42)

    run = p.add_argument_group("runtime")
    run.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    run.add_argument("--backend", choices=("auto", "gloo", "nccl"), default="auto")
    run.add_argument("--precision", choices=("auto", "fp32", "bf16", "fp16"), default="auto",
                     help="autocast dtype; auto = fp16 (+GradScaler) on CUDA, fp32 on CPU")
    run.add_argument("--threads", type=_positive_int, default=None,
                     help="torch.set_num_threads per rank (default: torch's, i.e. OMP_NUM_THREADS when set)")
    run.add_argument("--collective-timeout-sec", type=_positive_float, default=None,
                     help="process-group timeout, s (default: torch's)")
    run.add_argument("--log-every", type=_non_negative_int, default=100, help="rank-0 progress line every N timed steps (0 = off)")
    run.add_argument("--metrics-dir", default=None, help="write rank-<rank>.json here")
    run.add_argument("--save-step-times", action="store_true", help="add step_times_ms to the rank JSON")
    run.add_argument("--gather-metrics", action="store_true",
                     help="after timing, rank 0 gathers every rank's record and writes all rank files "
                          "(nodes without a shared --metrics-dir)")
    run.add_argument("--traceml-mode", choices=("auto", "manual"), default=None,
                     help=f"TraceML init mode under traceml run (default: ${TRACEML_MODE_ENV} or auto)")

    fault = p.add_argument_group("fault and calibration knobs (off by default)")
    fault.add_argument("--fault-rank", type=_non_negative_int, default=None, help="rank the faults apply to (default: all)")
    fault.add_argument("--fault-clock-skew-sec", type=_finite_float, default=0.0, help="stop clock reads S s ahead")
    fault.add_argument("--fault-crash-at-step", type=_positive_int, default=None, help="os._exit(3) at timed step N")
    fault.add_argument("--fault-hang-at-step", type=_positive_int, default=None, help="sleep forever at timed step N")
    fault.add_argument("--inject-step-ms", type=_non_negative_float, default=0.0, help="busy-wait X ms in every timed step")
    fault.add_argument("--inject-startup-sec", type=_non_negative_float, default=0.0, help="sleep X s before warmup")
    fault.add_argument("--inject-teardown-sec", type=_non_negative_float, default=0.0, help="sleep X s after the timed loop")
    return p


def _env_world_size() -> int:
    """World size the launcher announced (``WORLD_SIZE``), 1 when run without torchrun."""
    try:
        return max(1, int(os.environ.get("WORLD_SIZE", "1")))
    except ValueError:
        return 1


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse and cross-check the arguments; any problem exits 2 with one line, before torch is touched."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if (args.steps is None) == (args.duration_sec is None):
        parser.error("exactly one of --steps and --duration-sec is required")
    world = _env_world_size()
    if args.num_samples < args.batch_size * world:
        parser.error(
            f"--num-samples {args.num_samples} is smaller than one global batch "
            f"(--batch-size {args.batch_size} x world size {world})"
        )
    if args.fault_rank is not None and args.fault_rank >= world:
        parser.error(f"--fault-rank {args.fault_rank} is outside the world (size {world})")
    if args.no_sync_stop and args.duration_sec is None:
        parser.error("--no-sync-stop only applies with --duration-sec")
    if args.traceml_mode is None:
        env_mode = os.environ.get(TRACEML_MODE_ENV, "auto") or "auto"
        if env_mode not in ("auto", "manual"):
            parser.error(f"${TRACEML_MODE_ENV}={env_mode!r}: expected auto or manual")
        args.traceml_mode = env_mode
    return args


# --------------------------------------------------------------------------- small helpers


def busy_wait(seconds: float) -> None:
    """Spin on ``time.perf_counter`` for ``seconds`` (no sleep: see the module docstring)."""
    if seconds <= 0:
        return
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """``q``-th percentile (0..100) of already sorted values, linear interpolation (numpy's default)."""
    n = len(sorted_values)
    if n == 0:
        raise ValueError("percentile of no values")
    pos = (n - 1) * q / 100.0
    lo = int(math.floor(pos))
    hi = min(lo + 1, n - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def step_time_stats(durations_s: Sequence[float]) -> dict[str, float]:
    """Statistics of step durations (seconds in) in milliseconds: the schema's ``step_time_ms``."""
    ms = sorted(d * 1000.0 for d in durations_s)
    return {
        "mean": statistics.fmean(ms),
        "median": percentile(ms, 50),
        "p10": percentile(ms, 10),
        "p90": percentile(ms, 90),
        "p99": percentile(ms, 99),
        "min": ms[0],
        "max": ms[-1],
        "stdev": statistics.stdev(ms) if len(ms) > 1 else 0.0,
    }


def traceml_requested() -> bool:
    """True when running under ``traceml run`` with telemetry on."""
    return bool(os.environ.get("TRACEML_SESSION_ID")) and os.environ.get("TRACEML_DISABLED") != "1"


def _free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (for a world of one without torchrun)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ensure_single_process_env() -> None:
    """Without torchrun, make ``env://`` rendezvous work as a world of one."""
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        return
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("LOCAL_RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(_free_port()))


def _targeted(args: argparse.Namespace, rank: int) -> bool:
    """Whether the fault knobs apply to ``rank`` (``--fault-rank`` or every rank)."""
    return args.fault_rank is None or args.fault_rank == rank


def _peak_memory(device: str) -> tuple[int, str]:
    """Peak memory in bytes and its kind: CUDA max allocated, else the process's peak RSS."""
    if device == "cuda":
        import torch

        return int(torch.cuda.max_memory_allocated()), "cuda_max_allocated"
    import resource

    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(rss if sys.platform == "darwin" else rss * 1024), "max_rss"


# --------------------------------------------------------------------------- setup


class Runtime:
    """Resolved placement and precision of this rank (what the rank JSON reports)."""

    def __init__(self, args: argparse.Namespace) -> None:
        import torch

        self.rank = int(os.environ["RANK"])
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        self.world_size = int(os.environ["WORLD_SIZE"])
        self.node_rank = int(os.environ.get("GROUP_RANK", "0"))
        want_cuda = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
        if want_cuda and not torch.cuda.is_available():
            raise ValueError("--device cuda but CUDA is not available")
        self.device = "cuda" if want_cuda else "cpu"
        self.backend = args.backend if args.backend != "auto" else ("nccl" if self.device == "cuda" else "gloo")
        if self.backend == "nccl" and self.device != "cuda":
            raise ValueError("--backend nccl needs --device cuda")
        self.precision = args.precision if args.precision != "auto" else ("fp16" if self.device == "cuda" else "fp32")
        self.torch_device = torch.device(self.device, self.local_rank) if self.device == "cuda" else torch.device("cpu")

    def autocast(self) -> ContextManager[Any]:
        """Autocast context for the forward pass (none for fp32)."""
        import torch

        if self.precision == "fp32":
            return contextlib.nullcontext()
        dtype = torch.bfloat16 if self.precision == "bf16" else torch.float16
        return torch.autocast(device_type=self.device, dtype=dtype)


def init_process_group(args: argparse.Namespace, rt: Runtime) -> Any:
    """Create the default process group; return the group the stop flag uses (gloo, CPU tensors)."""
    import datetime

    import torch
    import torch.distributed as dist

    if rt.device == "cuda":
        torch.cuda.set_device(rt.torch_device)
    kwargs: dict[str, Any] = {"backend": rt.backend}
    if args.collective_timeout_sec is not None:
        kwargs["timeout"] = datetime.timedelta(seconds=args.collective_timeout_sec)
    dist.init_process_group(**kwargs)
    if rt.backend == "gloo":
        return None  # the default group
    return dist.new_group(backend="gloo", timeout=kwargs.get("timeout"))


def build_model(args: argparse.Namespace) -> "torch.nn.Module":
    """Linear+GELU x ``hidden_layers`` then a Linear to ``num_classes``; seeded, identical on every rank."""
    import torch
    from torch import nn

    torch.manual_seed(args.seed)
    layers: list[nn.Module] = []
    width = args.input_dim
    for _ in range(args.hidden_layers):
        layers += [nn.Linear(width, args.hidden_dim), nn.GELU()]
        width = args.hidden_dim
    layers.append(nn.Linear(width, args.num_classes))
    return nn.Sequential(*layers)


def build_loader(args: argparse.Namespace, rt: Runtime) -> tuple[Any, Any]:
    """Synthetic (x, y) TensorDataset through a DistributedSampler + DataLoader, deterministic from the seed."""
    import torch
    from torch.utils.data import DataLoader, TensorDataset
    from torch.utils.data.distributed import DistributedSampler

    gen = torch.Generator().manual_seed(args.seed)
    x = torch.randn(args.num_samples, args.input_dim, generator=gen)
    y = torch.randint(0, args.num_classes, (args.num_samples,), generator=gen)
    dataset = TensorDataset(x, y)
    sampler = DistributedSampler(
        dataset, num_replicas=rt.world_size, rank=rt.rank, shuffle=True, seed=args.seed, drop_last=True
    )
    loader = DataLoader(
        dataset, batch_size=args.batch_size, sampler=sampler, drop_last=True,
        num_workers=0, pin_memory=rt.device == "cuda",
    )
    return loader, sampler


def endless_batches(loader: Any, sampler: Any) -> Iterator[Any]:
    """Batches forever, advancing the sampler's epoch at each pass."""
    epoch = 0
    while True:
        sampler.set_epoch(epoch)
        yielded = False
        for batch in loader:
            yielded = True
            yield batch
        if not yielded:  # parse_args guarantees one global batch; guard anyway
            raise RuntimeError("data loader yielded no batch")
        epoch += 1


def init_traceml(args: argparse.Namespace) -> Callable[[Any], ContextManager[Any]] | None:
    """Under ``traceml run``: ``traceml_ai.init(mode)``, return ``trace_step``; else None (no import)."""
    if not traceml_requested():
        return None
    import traceml_ai

    traceml_ai.init(mode=args.traceml_mode)
    return traceml_ai.trace_step


# --------------------------------------------------------------------------- training


class Trainer:
    """One rank's training state: the DDP model, optimizer, scaler and the step function."""

    def __init__(self, args: argparse.Namespace, rt: Runtime, trace_step: Callable[[Any], ContextManager[Any]] | None) -> None:
        import torch
        from torch.nn.parallel import DistributedDataParallel as DDP

        self.rt = rt
        self.base_model = build_model(args).to(rt.torch_device)
        ids = [rt.local_rank] if rt.device == "cuda" else None
        self.model = DDP(self.base_model, device_ids=ids)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=args.lr)
        self.loss_fn = torch.nn.CrossEntropyLoss()
        use_scaler = rt.device == "cuda" and rt.precision == "fp16"
        self.scaler = torch.amp.GradScaler("cuda") if use_scaler else None
        self.trace_step = trace_step
        self.inject_s = args.inject_step_ms / 1000.0
        self.non_blocking = rt.device == "cuda"

    def _step_context(self) -> ContextManager[Any]:
        """``trace_step(model before DDP)`` under TraceML, else nothing."""
        return self.trace_step(self.base_model) if self.trace_step else contextlib.nullcontext()

    def step(self, batch: Any, inject: bool) -> "torch.Tensor":
        """One optimisation step on ``batch``; busy-wait the injected cost when ``inject``. Returns the loss (no sync)."""
        x, y = batch
        x = x.to(self.rt.torch_device, non_blocking=self.non_blocking)
        y = y.to(self.rt.torch_device, non_blocking=self.non_blocking)
        with self._step_context():
            self.optimizer.zero_grad(set_to_none=True)
            with self.rt.autocast():
                loss = self.loss_fn(self.model(x), y)
            if self.scaler is not None:
                self.scaler.scale(loss).backward()
                self.scaler.step(self.optimizer)
                self.scaler.update()
            else:
                loss.backward()
                self.optimizer.step()
            if inject:
                busy_wait(self.inject_s)
        return loss.detach()


class StopRule:
    """Decides after each timed step whether to leave the loop, identically on every rank unless unsynced."""

    def __init__(self, args: argparse.Namespace, rank: int, stop_group: Any) -> None:
        self.steps: int | None = args.steps
        self.duration_s: float | None = args.duration_sec
        self.every: int = args.stop_check_every
        self.synced: bool = not args.no_sync_stop
        self.skew_s: float = args.fault_clock_skew_sec if _targeted(args, rank) else 0.0
        self.group = stop_group
        self.t0: float = 0.0
        self._flag: Any = None

    @property
    def reason(self) -> str:
        """``stop_reason`` of the rank JSON."""
        if self.steps is not None:
            return "steps"
        return "duration" if self.synced else "duration_unsynced"

    def start(self, t0: float) -> None:
        """Start the (possibly skewed) stop clock at perf_counter time ``t0``."""
        import torch

        self.t0 = t0
        self._flag = torch.zeros(1, dtype=torch.int32)

    def _local_expired(self) -> bool:
        """This rank's own clock (plus skew) says the duration has passed."""
        assert self.duration_s is not None
        return time.perf_counter() + self.skew_s - self.t0 >= self.duration_s

    def should_stop(self, step: int) -> bool:
        """After timed step ``step`` (1-based): stop now? Collective on check steps in synced duration mode."""
        if self.steps is not None:
            return step >= self.steps
        if not self.synced:
            return self._local_expired()
        if step % self.every:
            return False
        import torch.distributed as dist

        self._flag.fill_(1 if self._local_expired() else 0)
        dist.all_reduce(self._flag, op=dist.ReduceOp.MAX, group=self.group)
        return bool(self._flag.item())


def maybe_fault(args: argparse.Namespace, rank: int, step: int) -> None:
    """Fire ``--fault-crash-at-step``/``--fault-hang-at-step`` at the start of timed step ``step`` on targeted ranks."""
    if not _targeted(args, rank):
        return
    if args.fault_crash_at_step == step:
        print(f"[rank{rank}] fault: crash at timed step {step}", file=sys.stderr, flush=True)
        os._exit(CRASH_EXIT_CODE)
    if args.fault_hang_at_step == step:
        print(f"[rank{rank}] fault: hang at timed step {step}", file=sys.stderr, flush=True)
        while True:
            time.sleep(3600)


class LoopResult:
    """What the timed loop measured."""

    def __init__(self) -> None:
        self.durations_s: list[float] = []
        self.first_step_start_epoch: float = 0.0
        self.last_step_end_epoch: float = 0.0
        self.final_loss: float = float("nan")


def _sync_device(rt: Runtime) -> None:
    """CUDA synchronize (only at the edges of the timed region)."""
    if rt.device == "cuda":
        import torch

        torch.cuda.synchronize()


def run_warmup(trainer: Trainer, batches: Iterator[Any], n: int) -> None:
    """``n`` untimed steps (inside trace_step under TraceML, without injected cost)."""
    for _ in range(n):
        trainer.step(next(batches), inject=False)


def run_timed(args: argparse.Namespace, rt: Runtime, trainer: Trainer, batches: Iterator[Any], stop: StopRule) -> LoopResult:
    """The timed loop: per-step host timestamps at boundaries, faults, stop rule, rank-0 progress."""
    res = LoopResult()
    _sync_device(rt)
    boundary = time.perf_counter()
    res.first_step_start_epoch = time.time()
    stop.start(boundary)
    loss = None
    step = 0
    while True:
        step += 1
        maybe_fault(args, rt.rank, step)
        loss = trainer.step(next(batches), inject=True)
        done = stop.should_stop(step)
        now = time.perf_counter()
        res.durations_s.append(now - boundary)
        boundary = now
        if rt.rank == 0 and args.log_every and step % args.log_every == 0:
            elapsed = now - stop.t0
            # no loss here: loss.item() would synchronise the device inside the timed loop
            print(f"step={step} elapsed_s={elapsed:.3f} steps_per_s={step / elapsed:.2f}", flush=True)
        if done:
            break
    _sync_device(rt)
    end = time.perf_counter()
    res.durations_s[-1] += end - boundary  # the closing synchronize belongs to the last step
    res.last_step_end_epoch = time.time()
    res.final_loss = float(loss.item()) if loss is not None else float("nan")
    return res


# --------------------------------------------------------------------------- record


def _versions(rt: Runtime) -> dict[str, str | None]:
    """torch/CUDA/NCCL versions and GPU name, null when absent."""
    import torch

    cuda = torch.version.cuda if torch.cuda.is_available() else None
    nccl: str | None = None
    gpu: str | None = None
    if rt.device == "cuda":
        try:
            v = torch.cuda.nccl.version()
            nccl = ".".join(str(p) for p in v) if isinstance(v, tuple) else str(v)
        except Exception:  # noqa: BLE001 - a missing NCCL is reported as null
            nccl = None
        gpu = torch.cuda.get_device_name(rt.torch_device)
    return {"torch_version": torch.__version__, "cuda_version": cuda, "nccl_version": nccl, "gpu_name": gpu}


def build_record(
    args: argparse.Namespace, rt: Runtime, res: LoopResult, pg_ready_epoch: float, traceml_active: bool
) -> dict[str, Any]:
    """The rank JSON (schema ``ddpbench.rank``; field meanings in ddpbench.formats.rank_record / docs/formats.md)."""
    from ddpbench.formats.rank_record import SCHEMA, SCHEMA_VERSION

    timed = len(res.durations_s)
    train_s = res.last_step_end_epoch - res.first_step_start_epoch
    train_s = train_s if train_s > 0 else sum(res.durations_s)
    samples = timed * args.batch_size
    peak, peak_kind = _peak_memory(rt.device)
    record: dict[str, Any] = {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "rank": rt.rank,
        "local_rank": rt.local_rank,
        "world_size": rt.world_size,
        "node_rank": rt.node_rank,
        "hostname": socket.gethostname(),
        "pid": os.getpid(),
        "device": rt.device,
        "backend": rt.backend,
        "precision": rt.precision,
        **_versions(rt),
        "args": dict(vars(args)),
        "timestamps": {
            "process_start": _PROCESS_START_EPOCH,
            "pg_ready": pg_ready_epoch,
            "first_step_start": res.first_step_start_epoch,
            "last_step_end": res.last_step_end_epoch,
            "exit": time.time(),
        },
        "warmup_steps": args.warmup_steps,
        "timed_steps": timed,
        "samples": samples,
        "train_s": train_s,
        "steps_per_s": timed / train_s,
        "samples_per_s": samples / train_s,
        "step_time_ms": step_time_stats(res.durations_s),
        "final_loss": res.final_loss,
        "peak_memory_bytes": peak,
        "peak_memory_kind": peak_kind,
        "stop_reason": "",  # filled by the caller
        "traceml": {"active": traceml_active, "mode": args.traceml_mode if traceml_active else None},
        "inject": {
            "step_ms": args.inject_step_ms,
            "startup_s": args.inject_startup_sec,
            "teardown_s": args.inject_teardown_sec,
        },
    }
    if args.save_step_times:
        record["step_times_ms"] = [d * 1000.0 for d in res.durations_s]
    return record


def write_record(metrics_dir: str, record: dict[str, Any]) -> None:
    """Write ``rank-<rank>.json`` atomically (temp file + fsync + rename)."""
    from ddpbench.io import write_json_atomic

    write_json_atomic(os.path.join(metrics_dir, f"rank-{record['rank']}.json"), record)


def gather_records(record: dict[str, Any], rt: Runtime, metrics_dir: str, group: Any) -> None:
    """``--gather-metrics``: send every rank's record to rank 0, which writes them all (after timing).

    For nodes that do not share ``--metrics-dir``: rank 0's node then holds every rank's file. The
    records travel over the gloo group the stop flag uses (CPU objects, no GPU sync). Each record's
    ``timestamps.exit`` is its rank's own, taken before the gather.
    """
    import torch.distributed as dist

    gathered: list[Any] | None = [None] * rt.world_size if rt.rank == 0 else None
    dist.gather_object(record, gathered, dst=0, group=group)
    if rt.rank == 0 and gathered is not None:
        for other in gathered:
            if isinstance(other, dict) and other.get("rank") != rt.rank:
                write_record(metrics_dir, other)


# --------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> int:
    """Parse, train, report. Returns the process exit status (0 on success)."""
    args = parse_args(argv)
    _ensure_single_process_env()
    trace_step = init_traceml(args)  # before the DataLoader exists, so auto mode can patch it

    import torch
    import torch.distributed as dist

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    try:
        rt = Runtime(args)
    except ValueError as exc:
        build_parser().error(str(exc))
    stop_group = init_process_group(args, rt)
    pg_ready = time.time()

    trainer = Trainer(args, rt, trace_step)
    loader, sampler = build_loader(args, rt)
    batches = endless_batches(loader, sampler)
    if args.inject_startup_sec:
        time.sleep(args.inject_startup_sec)
    run_warmup(trainer, batches, args.warmup_steps)
    stop = StopRule(args, rt.rank, stop_group)
    res = run_timed(args, rt, trainer, batches, stop)

    if args.inject_teardown_sec:
        time.sleep(args.inject_teardown_sec)
    if rt.rank == 0:
        n = len(res.durations_s)
        elapsed = res.last_step_end_epoch - res.first_step_start_epoch
        print(f"Done. steps={n} elapsed_s={elapsed:.3f} steps_per_s={n / elapsed if elapsed > 0 else 0.0:.3f}", flush=True)
    if args.metrics_dir:
        record = build_record(args, rt, res, pg_ready, trace_step is not None)
        record["stop_reason"] = stop.reason
        write_record(args.metrics_dir, record)
        if args.gather_metrics:
            gather_records(record, rt, args.metrics_dir, stop_group)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
