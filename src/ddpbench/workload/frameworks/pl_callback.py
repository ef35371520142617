"""ddpbench's Lightning ``Callback`` (``lightning.pytorch`` or ``pytorch_lightning``): one timed step per optimizer
step (``trainer.global_step`` advanced at ``on_train_batch_end``); the step limit set at ``setup``, the stop through
``trainer.should_stop``."""

from __future__ import annotations

import functools
import importlib
from typing import Any

from ddpbench.workload.frameworks.steps import TrainerSteps, precision_name


def _batch_length(batch: Any) -> int:
    """Samples in a batch: the first dimension of its first tensor (1 when it has none)."""
    if hasattr(batch, "shape") and len(batch.shape):
        return int(batch.shape[0])
    items = batch.values() if isinstance(batch, dict) else batch if isinstance(batch, (list, tuple)) else ()
    for item in items:
        length = _batch_length(item)
        if length:
            return length
    return 0


@functools.cache
def recorder_callback_class(namespace: str) -> type:
    """ddpbench's callback class for the Lightning namespace ``lightning.pytorch`` or ``pytorch_lightning``."""
    base = importlib.import_module(f"{namespace}.callbacks").Callback

    class RecorderCallback(base):  # type: ignore[misc, valid-type]
        """Times every optimizer step, applies ddpbench's stop, writes the rank record at ``on_train_end``."""

        def __init__(self) -> None:
            self.steps = TrainerSteps()
            self._global_step = 0

        def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
            limit = self.steps.step_limit()
            if stage == "fit" and limit is not None:
                trainer.fit_loop.epoch_loop.max_steps = limit
                trainer.fit_loop.max_epochs = -1

        def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
            if self.steps.recorder is None:
                self._global_step = int(trainer.global_step)
                device = "cuda" if getattr(trainer.strategy.root_device, "type", "cpu") == "cuda" else "cpu"
                self.steps.start(max(1, _batch_length(batch)) * int(trainer.accumulate_grad_batches),
                                 precision_name(trainer.precision), device=device)
            self.steps.step_begins()  # once per optimizer step (its first micro-batch); the batch is on the device

        def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
            if int(trainer.global_step) == self._global_step:
                return  # an accumulation micro-batch: no optimizer step yet
            self._global_step = int(trainer.global_step)
            loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
            if self.steps.step_done(loss):
                trainer.should_stop = True

        def on_train_end(self, trainer: Any, pl_module: Any) -> None:
            self.steps.finish()

    return RecorderCallback
