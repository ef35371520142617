"""Tool versions side by side (versions=): real releases of traceml-ai from PyPI, a wheel, a source tree, a bad spec.

The environments are real (uv, or venv + pip) and cached in one folder per test session, so the sweep test
and the spec tests share what they built.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, List

import pytest

from helpers.resources import last_line, resource_failed
from helpers.cli import ONE_RANK, only_sweep_dir, run_ddpbench, trials_in
from ddpbench.errors import ConfigError
from ddpbench.versions import envs
from ddpbench.versions.spec import parse_spec

if TYPE_CHECKING:
    from ddpbench.config import DdpbenchConfig

PACKAGE = "traceml-ai"


@pytest.fixture(scope="session")
def env_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One environment cache for the whole session (DDPBENCH_ENV_CACHE), in this process and its children."""
    root = tmp_path_factory.mktemp("env-cache")
    before = os.environ.get(envs.CACHE_ENV)
    os.environ[envs.CACHE_ENV] = str(root)
    yield root
    if before is None:
        os.environ.pop(envs.CACHE_ENV, None)
    else:
        os.environ[envs.CACHE_ENV] = before


@pytest.fixture(scope="session")
def downloads(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """traceml-ai 0.4.2's wheel and sdist, downloaded from PyPI once."""
    where = tmp_path_factory.mktemp("downloads")
    for kind in ("--only-binary=:all:", "--no-binary=:all:"):
        command = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", kind, "-d", str(where),
                   f"{PACKAGE}==0.4.2"]
        try:
            proc = subprocess.run(command, capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            resource_failed("the traceml-ai 0.4.2 download", command, "took over 300 s")
        if proc.returncode != 0:
            resource_failed("the traceml-ai 0.4.2 download", command, f"exited {proc.returncode}: {last_line(proc.stderr)}")
    return where


def imported_version(python: str) -> str:
    """The traceml-ai version an interpreter imports, with the file it imports it from."""
    out = subprocess.run([python, "-c", "import importlib.metadata as m, traceml_ai; "
                          "print(m.version('traceml-ai'), traceml_ai.__file__)"],
                         capture_output=True, text=True, timeout=120, check=True)
    return out.stdout.strip()


def test_spec_kinds_and_bad_specs(tmp_path: Path) -> None:
    assert parse_spec("0.4.2", PACKAGE, tmp_path).target == "traceml-ai==0.4.2"
    assert parse_spec("traceml-ai<0.5", PACKAGE, tmp_path).target == "traceml-ai<0.5"
    assert parse_spec("0.4.2", PACKAGE, tmp_path).key != parse_spec("0.5.0", PACKAGE, tmp_path).key
    with pytest.raises(ConfigError, match="no such wheel file"):
        parse_spec("missing.whl", PACKAGE, tmp_path)
    with pytest.raises(ConfigError, match="not a git repository"):
        parse_spec("nowhere@v1", PACKAGE, tmp_path)
    with pytest.raises(ConfigError, match="is not a version"):
        parse_spec("not a version", PACKAGE, tmp_path)


@pytest.mark.slow  # builds a real environment
def test_wheel_file_as_version(env_cache: Path, downloads: Path) -> None:
    wheel = next(downloads.glob("*.whl"))
    env = envs.build(parse_spec(str(wheel), PACKAGE, Path.cwd()), "traceml@wheel", say=lambda line: None)
    assert env.meta["kind"] == "wheel" and env.version == "0.4.2"
    version, where = imported_version(env.python).split()
    assert version == "0.4.2" and where.startswith(str(env.dir))


@pytest.mark.slow  # builds a real environment
def test_source_tree_as_version(env_cache: Path, downloads: Path, tmp_path: Path) -> None:
    sdist = next(downloads.glob("*.tar.gz"))
    with tarfile.open(sdist) as archive:
        archive.extractall(tmp_path, filter="data")
    tree = next(p for p in tmp_path.iterdir() if p.is_dir())
    env = envs.build(parse_spec(str(tree), PACKAGE, Path.cwd()), "traceml@tree", say=lambda line: None)
    assert env.meta["kind"] == "tree" and imported_version(env.python).split()[0] == "0.4.2"


@pytest.mark.slow  # builds a real environment
def test_cached_environment_is_reused(env_cache: Path) -> None:
    spec = parse_spec("0.4.2", PACKAGE, Path.cwd())
    envs.build(spec, "traceml==0.4.2", say=lambda line: None)
    said: List[str] = []
    again = envs.build(spec, "traceml==0.4.2", say=said.append)
    assert said == [] and again.version == "0.4.2"


@pytest.mark.slow  # builds a real environment
def test_spec_that_does_not_exist_is_one_line_and_runs_nothing(env_cache: Path, tmp_path: Path) -> None:
    run = run_ddpbench(["-m", "mode=native,traceml", "versions={traceml:[0.4.2,99.0.1]}", "repeat=1", "model=tiny",
                       "stop.steps=3"], tmp_path, timeout=300, env={envs.CACHE_ENV: str(env_cache)})
    errors = [line for line in run.stderr.splitlines() if line.startswith("ddpbench: error:")]
    assert run.returncode == 2 and len(errors) == 1 and "99.0.1" in errors[0], run.stderr
    assert not (tmp_path / "outputs" / "multirun").exists() or not list((tmp_path / "outputs").rglob("trial.json"))


def test_versions_naming_an_unswept_mode_is_refused(env_cache: Path, tmp_path: Path) -> None:
    run = run_ddpbench(["-m", "mode=native", "versions={traceml:[0.4.2]}", "repeat=1"], tmp_path, timeout=120,
                       env={envs.CACHE_ENV: str(env_cache)})
    assert run.returncode == 2 and "versions: mode traceml is not one of mode=native" in run.stderr, run.stderr


#: one release of each line TraceML published, in the shipped auto mode (0.3.0: the oldest launcher, ddpbench's
#: `<0.4` command and `<0.3.1` environment), and a 0.3.x release in the shipped manual mode
#: a 0.3, a 0.4 and the 0.5 release (0.3's command differs: command_by_version); the manual mode on 0.3.0 shares
#: that release's environment (one per release, not per mode)
RELEASES = {"traceml": ["0.3.0", "0.4.2", "0.5.0"], "traceml_manual": ["0.3.0"]}


@pytest.mark.slow
def test_releases_side_by_side(env_cache: Path, tmp_path: Path) -> None:
    env = {envs.CACHE_ENV: str(env_cache)}
    args = ["-m", "mode=native,traceml,traceml_manual", "versions={traceml:[0.3.0,0.4.2,0.5.0],traceml_manual:[0.3.0]}",
            "repeat=1", "model=tiny", "stop.steps=3", "stop.warmup_steps=1", "trial.log_every=0", ONE_RANK]
    run = run_ddpbench(args, tmp_path, timeout=900, env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    sweep = only_sweep_dir(tmp_path)
    trials = trials_in(sweep)
    assert [t["status"] for t in trials] == ["ok"] * 5
    by_mode = {t["mode"]: t for t in trials}
    assert set(by_mode) == {"native", *(f"{mode}=={v}" for mode, versions in RELEASES.items() for v in versions)}
    for mode, versions in RELEASES.items():
        for version in versions:
            trial = by_mode[f"{mode}=={version}"]
            arm = trial["arm"]
            assert arm["version"] == version and arm["same_packages"] is True and arm["package_diff"] == []
            assert trial["tool"]["usable"] and trial["traceml"]["steps_analyzed"], trial["tool"]  # its summary read
            assert Path(sweep / f"cluster.nproc_per_node=1,mode={mode}=={version},model=tiny,repeat=1,stop.steps=3,"
                        "stop.warmup_steps=1,switching=none,trial.log_every=0").is_dir()
    assert by_mode["native"]["arm"] is None
    report = (sweep / "report.md").read_text()
    assert "## Versions compared" in report and "traceml==0.4.2 (0.4.2) → traceml==0.5.0 (0.5.0)" in report
    assert "traceml==0.3.0 (0.3.0) → traceml==0.4.2 (0.4.2)" in report
    assert "building traceml_manual" not in run.stdout, run.stdout  # it shares traceml's 0.3.0 environment
    # a second sweep finds every environment cached: it builds nothing
    again = run_ddpbench([*args, f"sweep_name={sweep.name}"], tmp_path, timeout=300, env=env)  # resumes: runs nothing
    assert again.returncode == 0 and "building" not in again.stdout and again.stdout.count("ready (cached") == 4, \
        again.stdout + again.stderr
    code = subprocess.run([sys.executable, "-m", "ddpbench.report", str(sweep), "--fail-on-regression"],
                          capture_output=True, text=True, timeout=120)
    assert code.returncode == 3, code.stdout + code.stderr  # one pair: no interval, inconclusive
    assert json.loads((sweep / "analysis.json").read_text())["schema"] == "ddpbench.analysis"


@pytest.mark.slow  # builds a real environment
def test_release_without_the_modes_module_is_refused(env_cache: Path) -> None:
    # traceml-ai 0.2.0 ships its code as `traceml`: `import traceml_ai` would find the sweep's own 0.5.0
    with pytest.raises(ConfigError, match=r"traceml-ai 0\.2\.0 has no module traceml_ai of its own"):
        envs.build(parse_spec("0.2.0", PACKAGE, Path.cwd()), "traceml==0.2.0", say=lambda line: None,
                   module="traceml_ai")


@pytest.mark.slow  # builds a real environment
def test_flag_the_version_lacks_is_one_line_and_runs_nothing(env_cache: Path, tmp_path: Path) -> None:
    (tmp_path / "userconf" / "mode").mkdir(parents=True)
    (tmp_path / "userconf" / "mode" / "traceml_flag.yaml").write_text(
        "defaults:\n  - traceml\n  - _self_\nname: traceml_flag\ntool_args: ['--no-such-flag=1']\n")
    run = run_ddpbench(["--config-dir", str(tmp_path / "userconf"), "-m", "mode=native,traceml_flag",
                        "versions={traceml_flag:[0.4.2]}", "repeat=1", "model=tiny", "stop.steps=3"], tmp_path,
                       timeout=300, env={envs.CACHE_ENV: str(env_cache)})
    errors = [line for line in run.stderr.splitlines() if line.startswith("ddpbench: error:")]
    assert run.returncode == 2 and len(errors) == 1, run.stderr
    assert "traceml-ai 0.4.2 has no flag --no-such-flag" in errors[0]
    assert not list(tmp_path.rglob("trial.json"))


def test_unknown_summary_format_is_not_a_failure(tmp_path: Path) -> None:
    from ddpbench.trial import artifacts

    path = tmp_path / "final_summary.json"
    path.write_text(json.dumps({"schema_version": "2.0", "step_time": {"p50_ns": 1}}))
    found, problem = artifacts.check_traceml_summary(path, None)  # type: ignore[arg-type]
    assert found == [path] and problem is not None and problem.startswith(artifacts.UNKNOWN_FORMAT)
    assert artifacts.summary_section({"step_time": ["not", "an", "object"]}, str(path))["steps_analyzed"] is None
    assert artifacts.verdict("ok", None, artifacts.ToolOutput("traceml", [str(path)], 1, True, problem,
                                                              format="unknown")) == ("ok", None)


@pytest.mark.slow  # builds a real environment
def test_venv_and_pip_where_uv_is_missing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, downloads: Path) -> None:
    monkeypatch.setenv(envs.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(envs, "find_uv", lambda: None)  # the fallback path, built for real
    said: List[str] = []
    env = envs.build(parse_spec(str(next(downloads.glob("*.whl"))), PACKAGE, Path.cwd()), "traceml@wheel",
                     say=said.append, module="traceml_ai")
    assert "with venv + pip" in said[0] and env.meta["installer"] == "pip"
    version, where = imported_version(env.python).split()
    assert version == "0.4.2" and where.startswith(str(env.dir))


@pytest.mark.slow  # builds a real environment
def test_git_ref_of_a_local_repository_as_version(env_cache: Path, downloads: Path, tmp_path: Path) -> None:
    with tarfile.open(next(downloads.glob("*.tar.gz"))) as archive:
        archive.extractall(tmp_path, filter="data")
    repo = next(p for p in tmp_path.iterdir() if p.is_dir())
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    for step in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "release"], ["tag", "v0.4.2"]):
        subprocess.run([*git, *step], check=True, capture_output=True, timeout=60)
    spec = parse_spec(f"{repo}@v0.4.2", PACKAGE, Path.cwd())
    assert spec.kind == "git" and len(spec.fingerprint) == 40
    env = envs.build(spec, "traceml@git", say=lambda line: None, module="traceml_ai")
    assert imported_version(env.python).split()[0] == "0.4.2"
    with pytest.raises(ConfigError, match="no commit 'v9'"):
        parse_spec(f"{repo}@v9", PACKAGE, Path.cwd())



def _config(mode: str) -> "DdpbenchConfig":
    from hydra import compose, initialize_config_module

    from ddpbench.config import register_configs, typed_trial

    register_configs()
    with initialize_config_module("ddpbench.conf", version_base="1.3"):
        return typed_trial(compose("config", overrides=[f"mode={mode}", "sweep_name=s"]))


def _env_at(version: str, folder: Path) -> envs.ToolEnv:
    """A stand-in environment of traceml-ai ``version`` whose interpreter is this one (for the help command)."""
    (folder / "bin").mkdir(parents=True, exist_ok=True)
    if not (folder / "bin" / "python").exists():
        (folder / "bin" / "python").symlink_to(sys.executable)
    return envs.ToolEnv(parse_spec(version, PACKAGE, folder), folder, {"version": version})


def test_each_release_gets_its_launcher_from_the_modes_yaml(tmp_path: Path) -> None:
    """The shipped TraceML modes carry every release's differences as data (docs/versions.md has the table)."""
    import dataclasses

    from ddpbench.versions import arm

    for name in ("traceml", "traceml_manual"):
        mode = _config(name).mode
        for version in ("0.3.0", "0.3.1", "0.3.5.1", "0.3.6"):  # no __main__ in the launcher module before 0.4
            assert arm.template_for(mode, version)[1:3] == ["-c", "from traceml_ai.launcher.cli import main; main()"]
            assert arm.help_template_for(mode, version)[1:3] == arm.template_for(mode, version)[1:3]
        for version in ("0.4.0", "0.4.2", "0.5.0"):
            assert arm.template_for(mode, version) == list(mode.command)
            assert arm.help_template_for(mode, version) == list(mode.help_command)
        assert arm.template_flags(arm.template_for(mode, "0.3.0")) == arm.template_flags(list(mode.command))
        assert set(mode.env_by_version) == {"<0.3.1"} and mode.tool_versions == ">=0.3"
        assert mode.switch is not None and "at import" in mode.switch_by_version["<0.3.5"].stays_on
    callback = _config("traceml_callback").mode
    with pytest.raises(ConfigError, match=r"traceml-ai 0\.3\.0 cannot run this mode: it runs traceml-ai>=0\.3\.1"):
        arm.check_tool_version(callback, _env_at("0.3.0", tmp_path))
    arm.check_tool_version(callback, _env_at("0.3.1", tmp_path))
    cfg = _config("traceml")
    silent = dataclasses.replace(cfg, mode=dataclasses.replace(cfg.mode, help_command_by_version={
        "<1": ["{python}", "-c", "pass"]}))
    with pytest.raises(ConfigError, match="printed nothing at traceml-ai 0.3.0"):
        arm.check_flags(silent.mode, _env_at("0.3.0", tmp_path))
