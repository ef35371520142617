#!/usr/bin/env bash
# scripts/copy-checkout.sh DEST: this checkout's sources into DEST (created), without its build outputs, git data,
# results, wheels, virtual environment, tool caches or local cluster state. Builds run from such a copy: a build
# in the checkout itself (its build/, egg-info) would race any other build or install of it, and a cache the
# tests write while the copy is read (mypy's) would change under tar.
set -euo pipefail
[ $# -eq 1 ] || { echo "copy-checkout: error: usage: scripts/copy-checkout.sh DEST" >&2; exit 2; }
mkdir -p "$1"
tar -C "$(dirname "$0")/.." --exclude=./build --exclude=./dist --exclude=./.git --exclude=./outputs --exclude=./.whl \
    --exclude=./.venv --exclude=./.mypy_cache --exclude=./.pytest_cache --exclude=./.import_linter_cache \
    --exclude=./.slurm \
    --exclude='*.egg-info' --exclude=__pycache__ -cf - . | tar -xf - -C "$1"
