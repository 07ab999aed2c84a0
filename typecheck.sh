#!/usr/bin/env bash
# The project's static checks, the same locally and in CI.
set -eu
cd "$(dirname "$0")"
if [ -z "${PYTHON:-}" ]; then
  # The project's venv, brought up to date with pyproject.toml first (a no-op when it is):
  # a dependency added since the last install would otherwise read as a type error.
  ./dev venv
fi
PY=${PYTHON:-.venv/bin/python}
"$PY" -m ruff format --check mule tests bench examples
"$PY" -m ruff check mule tests bench examples
"$PY" -m mypy
# Import contracts (pyproject's [tool.importlinter]): the layers, and the test kit kept outside.
"$PY" -c 'import sys; from importlinter.cli import lint_imports_command; sys.argv[1:] = ["--no-cache"]; lint_imports_command()'
