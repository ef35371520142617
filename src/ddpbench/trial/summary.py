"""What a finished trial tells its sweeper and its user: the summary dict and the headline line."""

from typing import Any, Dict, Mapping

#: trial-record keys a job returns to the sweeper (progress lines, exit status)
SUMMARY_KEYS = ("mode", "repeat", "status", "wall_s", "steps_per_s", "steps", "error", "job_dir", "resumed")


def summary_of(trial: Mapping[str, Any]) -> Dict[str, Any]:
    """The small dict a job returns to the sweeper."""
    return {key: trial.get(key) for key in SUMMARY_KEYS}


def _fmt(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def headline(trial: Mapping[str, Any]) -> str:
    """One line with a trial's headline figures."""
    step = (trial.get("step_time_ms") or {}).get("median")
    return (
        f"{trial.get('mode')} repeat={trial.get('repeat')} status={trial.get('status')} "
        f"wall={_fmt(trial.get('wall_s'), '.2f')}s steps={trial.get('steps')} "
        f"steps/s={_fmt(trial.get('steps_per_s'), '.1f')} step_median={_fmt(step, '.2f')}ms "
        f"startup={_fmt(trial.get('startup_s'), '.2f')}s teardown={_fmt(trial.get('teardown_s'), '.2f')}s"
    )
