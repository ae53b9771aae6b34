#!/usr/bin/env bash
# Create (or reuse) the TensorFlow environment of the GSP and CCP parity tests at DIR:
#
#   bash scripts/tf_parity_env.sh DIR [PYTHON]
#   GSPDML_TF_PYTHON=DIR/bin/python pytest tests/parity/test_gsp_tf_step.py tests/parity/test_ccp_tf_step.py
#
# PYTHON makes the venv (default: the first of python3.11, python3.10, python3.9 and python3 on
# the PATH; TensorFlow 2.15 needs Python 3.9 to 3.11, checked); the pins are
# tests/parity/tf-requirements.txt. Idempotent: an environment built from the same pins (a stamp
# file records them; comments do not count) that has TensorFlow installed is left as it is.
set -euo pipefail
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
    echo "usage: bash scripts/tf_parity_env.sh DIR [PYTHON]" >&2
    exit 2
fi
dir=$1
python=${2:-}
if [ -z "$python" ]; then  # the first of these that exists, else python3 (checked below)
    for candidate in python3.11 python3.10 python3.9 python3; do
        if command -v "$candidate" >/dev/null; then python=$candidate; break; fi
    done
fi
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
requirements="$here/tests/parity/tf-requirements.txt"
stamp="$dir/.gspdml-tf-requirements"
pins=$(grep -Ev '^[[:space:]]*(#|$)' "$requirements")
if [ -x "$dir/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$pins" ] \
    && "$dir/bin/python" -c "import importlib.metadata as m; m.version('tensorflow-cpu')" 2>/dev/null; then
    echo "tf_parity_env: $dir is up to date"
    exit 0
fi
if ! command -v "$python" >/dev/null \
    || ! "$python" -c 'import sys; sys.exit(not (3, 9) <= sys.version_info[:2] <= (3, 11))'; then
    echo "tf_parity_env: ${python:-python3} is not found or not Python 3.9 to 3.11, which TensorFlow 2.15 needs (pass one as PYTHON)" >&2
    exit 1
fi
"$python" -m venv "$dir"
"$dir/bin/python" -m pip install --quiet --disable-pip-version-check -r "$requirements"
"$dir/bin/python" -c "import tensorflow as tf; print('tf_parity_env: TensorFlow', tf.__version__, 'in', '$dir')"
printf '%s\n' "$pins" > "$stamp"
