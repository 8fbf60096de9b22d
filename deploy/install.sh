#!/bin/sh
# Install tracelake from a source tree the way a fleet runs it: build the wheel, install the wheel (not editable)
# with the given extras, and check that every pinned dependency is met.
# Usage: deploy/install.sh SOURCE_DIR [EXTRAS]     (EXTRAS default: fleet; e.g. "fleet,profile" to add torch)
# deploy/Dockerfile runs it; tests/packaging/test_wheel.py runs it too, into a fresh venv, offline.
set -eu
src=${1:?usage: install.sh SOURCE_DIR [EXTRAS]}
extras=${2:-fleet}
wheels=$(mktemp -d)
python -m pip wheel --no-deps --wheel-dir "$wheels" "$src"
python -m pip install "$(ls "$wheels"/tracelake-*.whl)[$extras]"
python -m pip check
rm -rf "$wheels"
