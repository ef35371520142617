"""One Python environment per tool version, built once and reused: only the tool differs from the sweep's own.

A bare venv of the sweep's base interpreter holding the tool alone (``--no-deps``) and a ``.pth`` file adding
the sweep's own site-packages behind it; built with ``uv`` where found, else venv and pip; cached under
``$DDPBENCH_ENV_CACHE`` by the spec's key, marked ready by ``ddpbench-env.json`` (written last) (docs/versions.md).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

from ddpbench.errors import ConfigError
from ddpbench.io import write_json_atomic
from ddpbench.versions.spec import ToolSpec

CACHE_ENV = "DDPBENCH_ENV_CACHE"
DEFAULT_CACHE = "~/.cache/ddpbench/envs"
#: the file that marks an environment ready (written last): what was installed, by what, how long it took
MARKER = "ddpbench-env.json"
SHARED_PTH = "_ddpbench_shared.pth"
#: seconds one installer command may take
INSTALL_TIMEOUT_S = 600.0

#: run inside an environment: its packages (first found on sys.path wins, as imports do), the tool's
#: version, where it is installed, and the tool's requirements its environment does not satisfy
_PROBE = r"""
import json, sys, importlib.metadata as md, importlib.util
package, module = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else "")
try:
    found = importlib.util.find_spec(module) if module else None
except (ImportError, ValueError):
    found = None
origin = (found.origin or (list(found.submodule_search_locations or []) or [None])[0]) if found else None
seen = {}
for dist in md.distributions():
    name = (dist.metadata["Name"] or "").lower().replace("_", "-")
    if name and name not in seen:
        seen[name] = dist.version
unmet = []
try:
    dist = md.distribution(package)
    version, where = dist.version, str(dist.locate_file(""))
    try:
        from packaging.requirements import Requirement
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            have = seen.get(req.name.lower().replace("_", "-"))
            if have is None or not req.specifier.contains(have, prereleases=True):
                unmet.append(f"{text} (found {have or 'none'})")
    except ImportError:
        pass
except md.PackageNotFoundError:
    version, where = None, None
print(json.dumps({"packages": seen, "version": version, "location": where, "unmet": unmet,
                  "python": sys.executable, "module_origin": origin}))
"""


def cache_root() -> Path:
    """The folder environments are cached in: ``$DDPBENCH_ENV_CACHE`` or ``~/.cache/ddpbench/envs``."""
    return Path(os.path.expanduser(os.environ.get(CACHE_ENV) or DEFAULT_CACHE)).resolve()


@dataclass(frozen=True)
class ToolEnv:
    """A ready environment: its folder and what its marker file says."""

    spec: ToolSpec
    dir: Path
    meta: Dict[str, Any]

    @property
    def python(self) -> str:
        """The environment's interpreter: what ``{python}`` is in its arm's command."""
        return str(self.dir / "bin" / "python")

    @property
    def version(self) -> Optional[str]:
        """The tool's version installed there."""
        return self.meta.get("version")


def env_dir(spec: ToolSpec) -> Path:
    """Where ``spec``'s environment lives."""
    return cache_root() / spec.key


def ready(spec: ToolSpec) -> Optional[ToolEnv]:
    """The cached environment of ``spec`` when it is complete, else None."""
    folder = env_dir(spec)
    try:
        meta = json.loads((folder / MARKER).read_text())
    except (OSError, ValueError):
        return None
    return ToolEnv(spec, folder, meta) if (folder / "bin" / "python").exists() else None


def shared_site_dirs() -> List[str]:
    """The sweep interpreter's site-packages folders, in its import order: what every environment shares."""
    dirs = [p for p in sys.path if p and os.path.basename(p.rstrip("/")) in ("site-packages", "dist-packages")]
    purelib = sysconfig.get_paths()["purelib"]
    return list(dict.fromkeys([*dirs, *([purelib] if os.path.isdir(purelib) and purelib not in dirs else [])]))


def find_uv() -> Optional[str]:
    """The ``uv`` executable: on PATH or beside this interpreter (a venv used without activating it)."""
    path = os.pathsep.join([os.environ.get("PATH", os.defpath), os.path.dirname(sys.executable)])
    return shutil.which("uv", path=path)


def probe(python: str, package: str, module: str = "") -> Dict[str, Any]:
    """What :data:`_PROBE` finds in the interpreter ``python`` for the distribution ``package`` (and ``module``)."""
    out = subprocess.run([python, "-c", _PROBE, package, module], capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise ConfigError(f"versions: {python} cannot list its packages: {_last_line(out.stderr)}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def package_diff(env: Dict[str, str], sweep: Dict[str, str], package: str) -> List[str]:
    """Packages whose versions differ between an environment and the sweep's, the tool left out (one line each)."""
    tool = package.lower().replace("_", "-")
    names = sorted((set(env) | set(sweep)) - {tool})
    return [f"{n}: sweep {sweep.get(n, 'none')}, environment {env.get(n, 'none')}"
            for n in names if env.get(n) != sweep.get(n)]


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("WARNING: Location")]
    errors = [line for line in lines if "error" in line.lower() or "no solution" in line.lower()
              or "not found" in line.lower() or "because" in line.lower()]
    return ((errors or lines or ["no output"])[-1])[:300]


def _run(argv: List[str], spec: ToolSpec, what: str) -> None:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S,
                             env=dict(os.environ, UV_PYTHON_DOWNLOADS="never"))
    except (OSError, subprocess.TimeoutExpired) as error:
        raise ConfigError(f"versions: {spec.raw}: {what} failed: {error}") from None
    if out.returncode != 0:
        raise ConfigError(f"versions: {spec.raw}: cannot {what} {spec.target}: {_last_line(out.stderr + out.stdout)}")


def _create(spec: ToolSpec, folder: Path, uv: Optional[str]) -> None:
    """Create the bare venv, point it at the shared site-packages, install the tool alone into it."""
    base = getattr(sys, "_base_executable", None) or sys.executable
    python = str(folder / "bin" / "python")
    _run([uv, "venv", "-q", "--python", base, str(folder)] if uv else
         [base, "-m", "venv", "--without-pip", str(folder)], spec, "create a venv for")
    out = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, timeout=60)
    site = Path(out.stdout.strip())
    lines = "".join(f"import site; site.addsitedir({d!r})\n" for d in shared_site_dirs())
    (site / SHARED_PTH).write_text(lines)
    _run([uv, "pip", "install", "-q", "--python", python, "--no-deps", spec.target] if uv else
         [python, "-m", "pip", "install", "-q", "--no-deps", "--ignore-installed", "--no-warn-script-location",
          spec.target], spec, "install")


def check_module(env: ToolEnv, module: str) -> None:
    """Raise ConfigError when ``module`` (the mode's ``requires``) is not the environment's own copy: an import
    would find the sweep's (a release whose module has another name), and the arm would not run its version."""
    if not module or module in env.meta.get("modules", []):
        return
    origin = str(probe(env.python, env.spec.package, module).get("module_origin") or "")
    if not origin.startswith(str(env.dir)):
        raise ConfigError(f"versions: {env.spec.raw}: {env.spec.package} {env.version} has no module {module} of its "
                          f"own (the mode's requires); an import would find {origin or 'none'}")
    meta = {**env.meta, "modules": [*env.meta.get("modules", []), module]}
    write_json_atomic(env.dir / MARKER, meta)
    env.meta.update(meta)


def build(spec: ToolSpec, label: str, say: Callable[[str], None] = print, module: str = "") -> ToolEnv:
    """``spec``'s environment: the cached one, else built now (progress lines through ``say``).

    Raises ConfigError (one line naming the spec) when it cannot be built, or its package or ``module`` (the
    mode's ``requires``) is not its own; a failed build leaves nothing in the cache.
    """
    found = ready(spec) or _build(spec, label, say)
    check_module(found, module)
    return found


def _build(spec: ToolSpec, label: str, say: Callable[[str], None]) -> ToolEnv:
    cache_root().mkdir(parents=True, exist_ok=True)
    with open(cache_root() / f"{spec.key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        found = ready(spec)  # another driver built it while this one waited
        if found is not None:
            return found
        folder = env_dir(spec)
        shutil.rmtree(folder, ignore_errors=True)
        uv = find_uv()
        say(f"ddpbench: versions: building {label} ({spec.target}) with {'uv' if uv else 'venv + pip'} -> {folder}")
        start = time.monotonic()
        try:
            _create(spec, folder, uv)
            found_now = probe(str(folder / "bin" / "python"), spec.package)
            location = str(found_now.get("location") or "")
            if found_now.get("version") is None or not location.startswith(str(folder)):
                raise ConfigError(f"versions: {spec.raw}: installing {spec.target} gave no {spec.package} of its own")
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        meta = {"schema": "ddpbench.toolenv", "spec": spec.raw, "kind": spec.kind, "package": spec.package,
                "target": spec.target, "fingerprint": spec.fingerprint, "version": found_now["version"],
                "unmet_requirements": found_now["unmet"], "installer": "uv" if uv else "pip",
                "shared": shared_site_dirs(), "build_s": round(time.monotonic() - start, 3),
                "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "sweep_python": sys.executable}
        write_json_atomic(folder / MARKER, meta)
    say(f"ddpbench: versions: {label} built in {meta['build_s']:.1f} s ({spec.package} {meta['version']})")
    for unmet in meta["unmet_requirements"]:
        say(f"ddpbench: versions: {label}: requirement not met by the shared packages: {unmet}")
    return ToolEnv(spec, folder, meta)
