"""Makes the top-level `sweeps/` folder a Hydra config group: `python -m rookworld.train -m sweeps=NAME`.

Hydra finds this plugin through the `hydra.plugins` entry point declared in pyproject.toml (so
`pip install -e .` is needed); it appends the project root (the folder holding `sweeps/`) to the
config search path, after `conf/`.
"""
from pathlib import Path

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin

PROJECT_ROOT = Path(__file__).resolve().parents[2]


class RookworldSweepsSearchPath(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        if (PROJECT_ROOT / "sweeps").is_dir():
            search_path.append(provider="rookworld-sweeps", path=f"file://{PROJECT_ROOT}")
