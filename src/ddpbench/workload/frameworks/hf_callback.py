"""ddpbench's Hugging Face ``TrainerCallback``: one timed step per optimizer step (``on_step_end``); the step limit
set in ``args.max_steps`` at ``on_init_end``, the stop through ``control.should_training_stop``."""

from __future__ import annotations

import os
from typing import Any

from transformers.trainer_callback import TrainerCallback

from ddpbench.workload.frameworks import ENV_TOOL_DIR
from ddpbench.workload.frameworks.steps import UNBOUNDED, TrainerSteps, profiler_schedule

class RecorderTrainerCallback(TrainerCallback):  # type: ignore[misc]
    """Times every optimizer step, applies ddpbench's stop and writes the rank record at ``on_train_end``."""

    def __init__(self) -> None:
        self.steps = TrainerSteps()

    def on_init_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        limit = self.steps.step_limit()
        if limit is not None:  # stop=duration: HF needs a positive limit; ddpbench's stop comes long before 10**9
            args.max_steps = 10**9 if limit == UNBOUNDED else limit
        return control

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        precision = "bf16" if getattr(args, "bf16", False) else "fp16" if getattr(args, "fp16", False) else "fp32"
        self.steps.start(int(args.per_device_train_batch_size) * int(args.gradient_accumulation_steps), precision,
                         device="cuda" if str(args.device).startswith("cuda") else "cpu")
        return control

    def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> Any:
        if logs and "loss" in logs:
            self.steps.loss = logs["loss"]
        return control

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        self.steps.step_begins()
        return control

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if self.steps.step_done():
            control.should_training_stop = True
        return control

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        self.steps.finish()
        return control


class ProfilerTrainerCallback(TrainerCallback):  # type: ignore[misc]
    """torch.profiler for an HF Trainer (it has none of its own), stepped at every optimizer step; traces into
    ``$DDPBENCH_TOOL_DIR``."""

    def __init__(self) -> None:
        self.profiler: Any = None

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        import torch

        activities = [torch.profiler.ProfilerActivity.CPU]
        if torch.cuda.is_available() and str(args.device).startswith("cuda"):
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        handler = torch.profiler.tensorboard_trace_handler(os.environ.get(ENV_TOOL_DIR) or ".",
                                                           worker_name=f"rank{os.environ.get('RANK', '0')}")
        self.profiler = torch.profiler.profile(activities=activities, schedule=profiler_schedule(),
                                               on_trace_ready=handler)
        self.profiler.start()
        return control

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if self.profiler is not None:
            self.profiler.step()
        return control

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if self.profiler is not None:
            self.profiler.stop()
            self.profiler = None
        return control
