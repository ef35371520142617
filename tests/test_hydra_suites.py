"""The paired sweeper and the SLURM launcher as Hydra plugins: found by Hydra's own scan; the paired sweeper
passes the test suites Hydra ships for sweepers (as Hydra's basic sweeper runs them), and the SLURM launcher
those Hydra ships for launchers, on the local 2-node SLURM cluster."""

from hydra.core.plugins import Plugins
from hydra.plugins.launcher import Launcher
from hydra.plugins.sweeper import Sweeper
from hydra.test_utils.launcher_common_tests import BatchedSweeperTestSuite, IntegrationTestSuite, LauncherTestSuite
from pytest import fixture, mark

from helpers.slurm import slurm_cluster  # noqa: F401  (fixture)

# Hydra's own suite apps declare no version_base; their chdir warning is Hydra's, not the sweeper's.
pytestmark = mark.filterwarnings("ignore:Future Hydra versions will no longer change working directory")


@fixture(autouse=True)
def _fresh_process(fresh_hydra: None) -> None:
    """Hydra's suites expect a fresh process (tests/conftest.py: fresh_hydra)."""


def test_hydra_scan_discovers_the_plugins() -> None:
    assert "PairedSweeper" in [p.__name__ for p in Plugins.instance().discover(Sweeper)]
    assert "BoundedSlurmLauncher" in [p.__name__ for p in Plugins.instance().discover(Launcher)]


@mark.parametrize("launcher_name, overrides", [("basic", ["hydra/sweeper=paired",
                                                           "hydra.sweeper.max_batch_size=null"])])
class TestPairedSweeper(LauncherTestSuite):
    """Hydra's launcher suite through the paired sweeper (all jobs in one batch, as the suite expects)."""


@mark.parametrize("launcher_name, overrides", [("basic", ["hydra/sweeper=paired",
                                                           "hydra.sweeper.max_batch_size=2"])])
class TestPairedSweeperWithBatching(BatchedSweeperTestSuite):
    """Hydra's batched-sweeper suite: batches of 2 in the basic sweeper's product order."""


#: what submitit_slurm needs on the local 2-node cluster (tests/helpers/slurm.py: partition debug)
ON_LOCAL_SLURM = ["hydra.launcher.partition=debug", "hydra.launcher.timeout_min=2", "hydra.launcher.mem_gb=1",
                  "hydra.launcher.cpus_per_task=1", "hydra.launcher.poll_s=0.2"]


@mark.slurm
@mark.usefixtures("slurm_cluster")
@mark.parametrize("launcher_name, overrides", [("ddpbench_slurm", ON_LOCAL_SLURM)])
class TestBoundedSlurmLauncher(LauncherTestSuite):
    """Hydra's launcher suite through ddpbench's SLURM launcher, as any Hydra app would use it."""


@mark.slurm
@mark.usefixtures("slurm_cluster")
@mark.parametrize("task_launcher_cfg, extra_flags", [(
    {"defaults": [{"override hydra/launcher": "ddpbench_slurm"}, "_self_"]},
    ["-m", *ON_LOCAL_SLURM],
)])
class TestBoundedSlurmLauncherIntegration(IntegrationTestSuite):
    """Hydra's integration suite (apps run as their own processes) with ddpbench's SLURM launcher."""
