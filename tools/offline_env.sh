#!/usr/bin/env bash
# Source on a GPU machine without network, from the repository root, before any rookworld command:
#   source tools/offline_env.sh
# Installs the wheels in .whl/ (hydra, omegaconf, optuna, the sweeper, chess, sqlalchemy, ...; built by
# `pip download` elsewhere) into /tmp/site, registers rookworld's Hydra plugins (the `hydra.plugins`
# entry points of pyproject.toml, which Hydra finds through package metadata) without installing the
# package, and puts both on PYTHONPATH. MLflow is not needed: run with tracking=none.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .whl/*.whl || return 1
meta=/tmp/site/rookworld-0.1.0.dist-info
mkdir -p "$meta"
printf 'Metadata-Version: 2.1\nName: rookworld\nVersion: 0.1.0\n' > "$meta/METADATA"
python3 - "$meta/entry_points.txt" <<'PY'
import sys, tomllib
plugins = tomllib.load(open("pyproject.toml", "rb"))["project"]["entry-points"]["hydra.plugins"]
open(sys.argv[1], "w").write("[hydra.plugins]\n" + "".join(f"{k} = {v}\n" for k, v in plugins.items()))
PY
export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1 WHEELS_INSTALLED=1  # the bench scripts skip their install
