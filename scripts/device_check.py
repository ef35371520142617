"""Helpers of scripts/device-check.sh: check the carried wheel set, pick installable wheels.

  python3 scripts/device_check.py check WHEEL_DIR SRC_ROOT [--max-mib N]
  python3 scripts/device_check.py installable WHEEL_DIR [--strict]

Standard library only, except ``check`` (needs ``packaging``, run where the wheels are prepared). The plan and the
summary lines of a run are ``scripts/device_report.py``'s. Bad input: one line ``device-check: error: ...`` on
stderr and exit status 2; a wheel set that fails its checks exits 1.
"""

from __future__ import annotations

import argparse
import re
import sys
import zipfile
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path
from typing import Optional

PROG = "device-check"

#: Python packages of the device image ('cuda'; KINDS.md, read on a machine on 2026-11-17),
#: normalised names. A wheel of one of these would shadow the image's copy; a requirement on one
#: is met by the image.
IMAGE_PACKAGES = frozenset("""
absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch build
certifi charset-normalizer chex click cloudpickle cmake colorama contourpy coverage cuda-bindings cuda-core
cuda-pathfinder cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops equinox etils execnet filelock
flatbuffers flax fonttools formulaic frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx
huggingface-hub humanize hypothesis idna imageio iniconfig interface-meta jax jax-cuda13-pjrt
jax-cuda13-plugin jaxlib jaxtyping jinja2 joblib kiwisolver lazy-loader lightning lightning-utilities
linear-operator lineax llvmlite lxml markdown markdown-it-py markupsafe matplotlib mdurl meson ml-dtypes
mpi4py mpmath msgpack multidict multipledispatch mypy-extensions nanobind narwhals networkx ninja numba
numba-cuda numpy numpyro nvidia-cublas nvidia-cuda-cupti nvidia-cuda-nvrtc nvidia-cuda-runtime
nvidia-cudnn-cu13 nvidia-cufft nvidia-cufile nvidia-curand nvidia-cusolver nvidia-cusparse
nvidia-cusparselt-cu13 nvidia-ml-py nvidia-nccl-cu13 nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx onnx
onnx-ir onnxruntime onnxscript opencv-python-headless optax opt-einsum opt-einsum-fx optimistix
orbax-checkpoint packaging pandas pathspec patsy peft pillow pip pluggy portalocker prometheus-client
propcache protobuf psutil pyarrow pybind11 py-cpuinfo pygments pyparsing pyproject-hooks pyre-extensions
pytest pytest-benchmark pytest-cov pytest-mock pytest-timeout pytest-xdist python-dateutil
pytorch-lightning pyyaml regex requests rich sacrebleu safetensors scikit-build-core scikit-image
scikit-learn scipy seaborn sentencepiece sentence-transformers setuptools shellingham simplejson six
sortedcontainers statsmodels sympy tabulate tensorboard tensorboard-data-server tensorstore threadpoolctl
tifffile tiktoken timm tokenizers toolz torch torchaudio torchdiffeq torch-geometric torchmetrics
torchvision tqdm transformers treescope triton typer typing-extensions typing-inspect urllib3 uvloop
wadler-lindig werkzeug wheel wrapt xarray xxhash yarl zipp
""".split())

#: versions of image packages a session's pip list there showed (KINDS.md, 2026-11)
IMAGE_VERSIONS = {"torch": "2.11.0", "numpy": "2.5.2"}

#: what ddpbench needs on the device beyond the image; each must be in the wheel set
REQUIRED = ("ddpbench", "hydra-core", "omegaconf", "antlr4-python3-runtime", "submitit",
            "hydra-submitit-launcher", "traceml-ai")

#: the device's interpreter, for requirement markers
DEVICE_MARKERS = {
    "python_version": "3.12", "python_full_version": "3.12.3", "implementation_name": "cpython",
    "platform_python_implementation": "CPython", "sys_platform": "linux", "platform_system": "Linux",
    "platform_machine": "x86_64", "os_name": "posix", "extra": "",
}


class CheckError(Exception):
    """Bad input: reported as one ``device-check: error:`` line, exit status 2."""


def normalise(name: str) -> str:
    """A distribution name in PEP 503 normal form."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Wheel:
    """One wheel file of the set: name, version and tags from its file name, requirements from METADATA."""

    # the file
    path: Path
    # normalised distribution name
    name: str
    # version as in the file name
    version: str
    # (python, abi, platform) tag sets, e.g. ({"cp312"}, {"cp312"}, {"manylinux_2_17_x86_64"})
    tags: tuple[frozenset[str], frozenset[str], frozenset[str]]
    # Requires-Dist lines
    requires: tuple[str, ...]


def read_wheel(path: Path) -> Wheel:
    """Parse ``NAME-VERSION(-BUILD)?-PY-ABI-PLAT.whl`` and its ``*.dist-info/METADATA``."""
    parts = path.name[:-len(".whl")].split("-")
    if not path.name.endswith(".whl") or len(parts) not in (5, 6):
        raise CheckError(f"not a wheel file name: {path.name}")
    py, abi, plat = (frozenset(p.split(".")) for p in parts[-3:])
    try:
        with zipfile.ZipFile(path) as zf:
            meta_name = next(n for n in zf.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n))
            meta = HeaderParser().parsestr(zf.read(meta_name).decode("utf-8"))
    except (zipfile.BadZipFile, StopIteration, OSError) as exc:
        raise CheckError(f"unreadable wheel {path.name}: {exc or 'no METADATA'}") from None
    return Wheel(path, normalise(parts[0]), parts[1], (py, abi, plat), tuple(meta.get_all("Requires-Dist") or ()))


def fits_device(wheel: Wheel) -> bool:
    """Whether CPython 3.12 on manylinux x86-64 (glibc 2.39 or older wheels) can install the wheel."""
    py, abi, plat = wheel.tags
    py_ok = bool(py & {"py3", "py312", "cp312"})
    abi_ok = bool(abi & {"none", "abi3", "cp312"})
    plat_ok = "any" in plat or any(
        re.fullmatch(r"(manylinux1|manylinux2010|manylinux2014|manylinux_2_\d+)_x86_64", p) for p in plat
    ) and not any((m := re.fullmatch(r"manylinux_2_(\d+)_x86_64", p)) and int(m.group(1)) > 39 for p in plat)
    return py_ok and abi_ok and plat_ok


def package_files(src_root: Path) -> list[str]:
    """Paths a ddpbench wheel must hold: every module under src/ and every config under conf/."""
    files = [str(p.relative_to(src_root / "src")) for p in sorted((src_root / "src").rglob("*.py"))
             if "__pycache__" not in p.parts and not any(part.endswith(".egg-info") for part in p.parts)]
    files += ["ddpbench/conf/" + str(p.relative_to(src_root / "conf")) for p in sorted((src_root / "conf").rglob("*.yaml"))]
    return files


def check_set(wheels: list[Wheel], src_root: Path, max_bytes: int) -> list[str]:
    """Problems of the wheel set (empty when it is complete and consistent); see docs/gpu.md."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.version import Version

    problems: list[str] = []
    by_name: dict[str, Wheel] = {}
    for w in wheels:
        if w.name in by_name:
            problems.append(f"two versions of {w.name}: {by_name[w.name].path.name}, {w.path.name}")
        by_name[w.name] = w
        if w.name in IMAGE_PACKAGES:
            problems.append(f"{w.path.name}: the image has {w.name}; a carried copy would shadow it")
        if not fits_device(w):
            problems.append(f"{w.path.name}: not installable by CPython 3.12 on manylinux x86-64")
    problems += [f"missing: {name}" for name in REQUIRED if name not in by_name]
    for w in wheels:
        for line in w.requires:
            try:
                req = Requirement(line)
            except InvalidRequirement as exc:
                problems.append(f"{w.path.name}: bad Requires-Dist {line!r}: {exc}")
                continue
            if req.marker is not None and not req.marker.evaluate(DEVICE_MARKERS):
                continue
            dep = normalise(req.name)
            if dep in by_name:
                have = by_name[dep].version
            elif dep in IMAGE_PACKAGES:
                have = IMAGE_VERSIONS.get(dep)
                if have is None:
                    continue  # the image's version is not recorded: the name must do
            else:
                problems.append(f"{w.name} needs {line}: neither in the set nor in the image")
                continue
            if not req.specifier.contains(Version(have), prereleases=True):
                problems.append(f"{w.name} needs {line}, the {'set' if dep in by_name else 'image'} has {dep} {have}")
    own = by_name.get("ddpbench")
    if own is not None:
        with zipfile.ZipFile(own.path) as zf:
            held = set(zf.namelist())
        absent = [f for f in package_files(src_root) if f not in held]
        if absent:
            problems.append(f"{own.path.name} lacks {len(absent)} file(s) of the checkout, e.g. {', '.join(absent[:3])}"
                            " (a package missing from pyproject.toml's packages list?)")
    total = sum(w.path.stat().st_size for w in wheels)
    if total > max_bytes:
        problems.append(f"the set is {total / 2**20:.1f} MiB, over the {max_bytes / 2**20:.0f} MiB allowed")
    return problems


def _wheels_in(wheel_dir: Path) -> list[Wheel]:
    if not wheel_dir.is_dir():
        raise CheckError(f"no wheel folder {wheel_dir} (run scripts/device-check.sh prepare first)")
    wheels = [read_wheel(p) for p in sorted(wheel_dir.glob("*.whl"))]
    if not wheels:
        raise CheckError(f"no wheels in {wheel_dir} (run scripts/device-check.sh prepare first)")
    return wheels


def cmd_check(args: argparse.Namespace) -> int:
    wheels = _wheels_in(Path(args.wheel_dir))
    for w in wheels:
        print(f"  {w.name:<26} {w.version:<10} {w.path.stat().st_size / 1024:9.0f} KiB  {w.path.name}")
    total = sum(w.path.stat().st_size for w in wheels)
    problems = check_set(wheels, Path(args.src_root), int(args.max_mib * 2**20))
    for p in problems:
        print(f"{PROG}: check failed: {p}", file=sys.stderr)
    print(f"{PROG}: {len(wheels)} wheels, {total / 2**20:.2f} MiB in {args.wheel_dir} "
          f"({'complete and consistent' if not problems else f'{len(problems)} problem(s)'})")
    return 1 if problems else 0


def cmd_installable(args: argparse.Namespace) -> int:
    """Print the wheels this interpreter can install, one a line; the others go to stderr (or fail --strict)."""
    from importlib.metadata import PackageNotFoundError, version

    tags = _interpreter_tags()
    for w in _wheels_in(Path(args.wheel_dir)):
        py, abi, plat = w.tags
        if any(f"{p}-{a}-{pl}" in tags for p in py for a in abi for pl in plat):
            print(w.path)
            continue
        if args.strict:
            raise CheckError(f"{w.path.name} does not install on this Python ({sys.version.split()[0]})")
        try:
            local = version(w.name)
        except PackageNotFoundError:
            raise CheckError(f"{w.path.name} does not install here and {w.name} is not installed either") from None
        print(f"{PROG}: {w.path.name} is for another platform; using the installed {w.name} {local}", file=sys.stderr)
    return 0


def _interpreter_tags() -> set[str]:
    try:
        from packaging.tags import sys_tags
    except ImportError:  # pip vendors packaging
        from pip._vendor.packaging.tags import sys_tags
    return {str(t) for t in sys_tags()}


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("check", help="check a wheel set for the device")
    p.add_argument("wheel_dir")
    p.add_argument("src_root", help="the checkout ddpbench's wheel was built from")
    p.add_argument("--max-mib", type=float, default=32.0, help="size limit of the set, MiB")
    p.set_defaults(func=cmd_check)
    p = sub.add_parser("installable", help="wheels this Python can install")
    p.add_argument("wheel_dir")
    p.add_argument("--strict", action="store_true", help="fail on a wheel this Python cannot install")
    p.set_defaults(func=cmd_installable)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except CheckError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
