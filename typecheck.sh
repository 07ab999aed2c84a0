#!/usr/bin/env bash
# The project's static checks, the same locally and in CI.
set -eu
cd "$(dirname "$0")"
PY=${PYTHON:-.venv/bin/python}
"$PY" -m ruff format --check mule tests bench examples
"$PY" -m ruff check mule tests bench examples
"$PY" -m mypy
# Import contracts (pyproject's [tool.importlinter]): the layers, and the test kit kept outside.
"$PY" -c 'import sys; from importlinter.cli import lint_imports_command; sys.argv[1:] = ["--no-cache"]; lint_imports_command()'
