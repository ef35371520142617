#!/usr/bin/env bash
# setup.sh: install ddpbench and everything it runs with into the current Python environment.
#
#   bash scripts/setup.sh          # ddpbench (editable) + traceml-ai; CPU torch 2.13 when no torch is installed
#   bash scripts/setup.sh --test   # also pytest, build, mypy, import-linter, and (root, Debian/Ubuntu)
#                                  # slurm-wlm + munge + iproute2 + chromium (the history page's browser test)
#                                  # for the tests
#
# ddpbench itself runs from any install mode (it registers its sweeper and launcher with Hydra itself).
# This script uses setuptools' "strict" editable mode, a tree of links to src/ and conf/ under
# build/__editable__.*, because other Hydra apps, and the tests that run Hydra's own suites, find
# hydra/sweeper=paired and hydra/launcher=ddpbench_slurm only through Hydra's plugin scan, which walks that
# tree like any folder; the default editable mode hides the plugins from it. Edits to existing files are
# live; after adding or removing a module, run this script again.
#
# Environment: PYTHON (default python3); TORCH_SPEC (default torch==2.13.0) is installed only when
# `import torch` fails — on a GPU machine install the torch build you want first.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
extras=traceml
if [ "${1:-}" = "--test" ]; then
    extras=test
elif [ $# -gt 0 ]; then
    echo "setup.sh: error: unknown option '$1' (use --test or nothing)" >&2
    exit 2
fi

if ! "$PY" -c "import torch" >/dev/null 2>&1; then
    "$PY" -m pip install --quiet "${TORCH_SPEC:-torch==2.13.0}"
fi
"$PY" -m pip install --quiet -e ".[$extras]" --config-settings editable_mode=strict

if [ "$extras" = test ]; then
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
        bash scripts/slurm-local.sh install
        if ! command -v ip >/dev/null 2>&1; then
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2 >/dev/null
        fi
        if ! command -v chromium >/dev/null 2>&1; then  # package lists may be stale when SLURM was there
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null 2>&1 \
                || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }
        fi
    else
        echo "setup.sh: not root or no apt-get: SLURM tests need slurm-wlm and munge installed by hand," \
             "the history page's browser test chromium" >&2
    fi
fi
echo "setup.sh: ddpbench installed for $("$PY" --version)" >&2
