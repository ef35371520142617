"""ddpbench's Hugging Face ``TrainerCallback``: one timed step per optimizer step (``on_step_end``).

Gradient accumulation: HF calls ``on_step_begin``/``on_step_end`` once per optimizer step (the
micro-batches in between are ``on_substep_end``), so a step is an optimizer step and its samples are
``per_device_train_batch_size × gradient_accumulation_steps``. The step limit goes into ``args.max_steps``
at ``on_init_end`` (before ``train()`` reads it); the stop is ``control.should_training_stop``.
"""

from __future__ import annotations

from typing import Any

from transformers.trainer_callback import TrainerCallback

from ddpbench.workload.frameworks.steps import UNBOUNDED, TrainerSteps, precision_name

HF_UNBOUNDED_STEPS = 10**9
"""``max_steps`` for stop=duration: HF needs a positive limit; ddpbench's stop comes long before it."""


class RecorderTrainerCallback(TrainerCallback):  # type: ignore[misc]
    """Times every optimizer step, applies ddpbench's stop and writes the rank record at ``on_train_end``."""

    def __init__(self) -> None:
        self.steps = TrainerSteps()

    def on_init_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        limit = self.steps.step_limit()
        if limit is not None:
            args.max_steps = HF_UNBOUNDED_STEPS if limit == UNBOUNDED else limit
        return control

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        precision = "bf16" if getattr(args, "bf16", False) else "fp16" if getattr(args, "fp16", False) else "fp32"
        self.steps.start(int(args.per_device_train_batch_size) * int(args.gradient_accumulation_steps),
                         precision_name(precision), device="cuda" if str(args.device).startswith("cuda") else "cpu")
        return control

    def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> Any:
        if logs and "loss" in logs:
            self.steps.loss = logs["loss"]
        return control

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if self.steps.step_done():
            control.should_training_stop = True
        return control

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        self.steps.finish()
        return control
