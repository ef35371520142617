"""A small Hydra application unrelated to ddpbench: installing ddpbench must not change what it does,
beyond offering ``hydra/sweeper=paired``. Used by scripts/check-wheel.sh from an installed wheel."""

import hydra
from omegaconf import DictConfig


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> None:
    """Print one line naming the job's values."""
    print(f"other_app: x={cfg.x} greeting={cfg.greeting}", flush=True)


if __name__ == "__main__":
    main()
