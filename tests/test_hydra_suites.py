"""The paired sweeper and the SLURM launcher as Hydra plugins: found by Hydra's own scan, and the paired
sweeper passes the test suites Hydra ships for sweepers (as Hydra's basic sweeper runs them)."""

from hydra.core.plugins import Plugins
from hydra.plugins.launcher import Launcher
from hydra.plugins.sweeper import Sweeper
from hydra.test_utils.launcher_common_tests import BatchedSweeperTestSuite, LauncherTestSuite
from pytest import mark

# Hydra's own suite apps declare no version_base; their chdir warning is Hydra's, not the sweeper's.
pytestmark = mark.filterwarnings("ignore:Future Hydra versions will no longer change working directory")


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
