#!/usr/bin/env bash
# The project's static checks, the same locally and in CI.
set -eu
cd "$(dirname "$0")"
PY=${PYTHON:-.venv/bin/python}
"$PY" -m ruff format --check mule tests bench examples
"$PY" -m ruff check mule tests bench examples
"$PY" -m mypy
