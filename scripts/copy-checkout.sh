#!/usr/bin/env bash
# scripts/copy-checkout.sh DEST: this checkout's sources into DEST (created), without its build outputs, git data,
# results or wheels. Builds run from such a copy: a build in the checkout itself (its build/, egg-info) would race
# any other build or install of it.
set -euo pipefail
[ $# -eq 1 ] || { echo "copy-checkout: error: usage: scripts/copy-checkout.sh DEST" >&2; exit 2; }
mkdir -p "$1"
tar -C "$(dirname "$0")/.." --exclude=./build --exclude=./dist --exclude=./.git --exclude=./outputs --exclude=./.whl \
    --exclude='*.egg-info' --exclude=__pycache__ -cf - . | tar -xf - -C "$1"
