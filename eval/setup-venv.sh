#!/usr/bin/env bash
# Creates eval/.venv with the reference implementations used to make fixtures and to benchmark
# side by side. They are never runtime dependencies of vocab.
# usage: eval/setup-venv.sh            (idempotent; prints the venv's python path)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
venv=${VOCAB_VENV:-$here/.venv}
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv" >&2
fi
"$venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements.txt" >&2
echo "$venv/bin/python"
