"""The folder layout is the architecture (docs/architecture.md); these checks keep it so.

- No import cycle among rookworld modules. Every import counts, module-level or inside a function
  (a function-level import only hides a cycle); imports under `if TYPE_CHECKING:` do not run.
- The library never imports an entry point (a module run with `python -m`), a command
  (rookworld.commands) or a measurement tool (rookworld.bench), and no entry point imports another
  entry point: entry points share setup through library modules.
- Drivers sit above what they drive: no module outside rookworld/sweep/ imports rookworld.sweep. What
  a sweep adds to a run (its pruning hook, where the run is filed in MLflow) arrives through config
  `_target_`s (rookworld/app/hooks.py).
- Only the loader (rookworld.app.config, with the entry points' Hydra plumbing), the entry points,
  rookworld/tracking/ and rookworld/sweep/ import omegaconf or hydra: the rest of the library gets
  typed specs (rookworld/specs/) or plain values, never a DictConfig.
- The statistics (rookworld/stats/) are the ground floor: they import the standard library, numpy, scipy
  and each other only: no Optuna, Hydra or MLflow, nothing of rookworld/sweep/.
- The library folders (data/, model/, tasks/, grpo/) sit below the run's assembly: they import no
  config, components, composition, errors or specs module, and take plain values or their own small
  types instead (imports under `if TYPE_CHECKING:`, for annotations, do not run and do not count).
  Their `python -m` commands live apart, in rookworld/commands/.
- The repository stands alone: code, configs, docs and tests never point at a path outside it,
  at an issue number or at an outside seed run.
- The house has floors (FLOORS: the statistics, tasks and model at the bottom, the tools at the top): no
  import runs up a floor, and at most LOBBY_LIMIT modules stand loose in rookworld/ itself.
- No module imports a private part (a leading underscore) of another package, and every class name is
  defined in one module only.
- A name with a leading underscore is used only in the module that defines it (library, tests and
  tools alike): no `x._name` or `from m import _name` of another module's private name. Dunders are
  not private; `self._x` in a class of the module is its own (unless the class extends a class of
  another module of ours).
"""
from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "rookworld"
TOOLS = "rookworld.bench"  # measurement tools: may import the library, never the other way round
COMMANDS = "rookworld.commands"  # the python -m commands besides the runs: may import the library, never the other way round
DRIVER = "rookworld.sweep"  # drives runs through Hydra: may import the library, never the other way round
SCANNED = ("rookworld", "conf", "sweeps", "docs", "tests", "README.md")
PYTHON_FOLDERS = ("rookworld", "tests", "tools")  # where the private-name rule looks
ON_SYS_PATH = ("tests",)  # pytest puts tests/ on sys.path: its helpers are imported by file name
TEXT_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".txt", ".sh", ".toml", ".cfg", ".json"}
# Built from pieces so that this file does not match its own patterns.
OUTSIDE_REFERENCES = {
    "a shared folder outside the repository": re.compile(r"\bshared[/]"),
    "an issue number": re.compile(r"\bissue[s]? #?\d+", re.IGNORECASE),
    "an outside seed run": re.compile(r"\bseed[s]? 0\d\d\b", re.IGNORECASE),
    "a path on the development machine": re.compile(r"(?<![\w.])/work[/]"),
}
PARENT_PATH = re.compile(r"(?:\.\.[/])+[\w./-]*")
CONFIG_LIBRARIES = ("omegaconf", "hydra")
# Besides the entry points, the modules that may import CONFIG_LIBRARIES, and why.
CONFIG_SIDE = {
    "rookworld.app.config": "the loader: the composed config becomes the typed specs",
    "rookworld.app.composition": "the entry points' composition (one-line messages for a bad override)",
    "rookworld.app.errors": "the entry points' exit policy (asks Hydra whether this is a multirun)",
    "rookworld.app.hooks": "builds what a driver adds to a run from the config's _target_s (trial.hooks, tracking.run_link)",
}
CONFIG_SIDE_PACKAGES = ("rookworld.tracking", "rookworld.sweep")  # they file runs and drive sweeps through Hydra
LIBRARY_FOLDERS = ("rookworld.data", "rookworld.model", "rookworld.tasks", "rookworld.grpo")
ASSEMBLY = ("rookworld.app.config", "rookworld.run.build", "rookworld.app.composition", "rookworld.app.errors", "rookworld.specs")
STATS = "rookworld.stats"
# The floors of the house, bottom up: a module imports only its own floor and those below (a wing is a folder
# of rookworld/, a lobby module its own room). Tools, commands and drivers stand on the top floors.
FLOORS = (
    ("stats", "tasks", "model", "outcomes", "interrupts"),
    ("stockfish", "tracking"),
    ("data", "judge"),
    ("grpo",),
    ("specs", "final_pool"),
    ("run",),
    ("app",),
    ("sft", "sweep", "commands", "train", "play"),
    ("bench", "warm_start"),
)
LOBBY_LIMIT = 10  # loose modules in rookworld/ itself (the package's __init__.py aside)
STATS_MAY_IMPORT = ("__future__", "numpy", "scipy", STATS)  # and the standard library


# ---------------------------------------------------------------- the import graph

def module_name(path: Path, root: Path = REPO) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_modules(root: Path = PACKAGE) -> dict[str, Path]:
    return {module_name(path, root.parent): path for path in sorted(root.rglob("*.py"))}


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(child) for stmt in node.body for child in ast.walk(stmt))
    return skipped


def imported_names(path: Path, package: str) -> set[str]:
    """Every module name the source at `path` imports anywhere, bar `if TYPE_CHECKING:` (relative
    imports resolved against `package`; `from a.b import c` gives both a.b and a.b.c)."""
    tree = ast.parse(path.read_text(), str(path))
    skipped = _type_checking_nodes(tree)
    found = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def imported_modules(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The rookworld modules `name` imports anywhere in its source (`from a.b import c` counts as
    a.b.c when that is a module, else as a.b)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    return {m for m in imported_names(path, package) if m in modules and m != name}


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    return {name: imported_modules(name, path, modules) for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as [a, b, ..., a], or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                return path[path.index(target):] + [target]
            if target not in state:
                cycle = visit(target)
                if cycle:
                    return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            cycle = visit(start)
            if cycle:
                return cycle
    return None


def entry_points(modules: dict[str, Path]) -> set[str]:
    """Modules run with `python -m` (a __main__ guard or a __main__.py)."""
    return {name for name, path in modules.items()
            if path.name == "__main__.py" or re.search(r"if __name__ == ['\"]__main__['\"]", path.read_text())}


def is_tool(name: str) -> bool:
    """A measurement tool (rookworld.bench) or a command (rookworld.commands): apart from the library."""
    return any(name == apart or name.startswith(apart + ".") for apart in (TOOLS, COMMANDS))


def layering_violations(graph: dict[str, set[str]], entries: set[str]) -> list[str]:
    problems = []
    for name, targets in sorted(graph.items()):
        for target in sorted(targets):
            if name in entries and target in entries:
                problems.append(f"entry point {name} imports entry point {target}: move the shared code "
                                "into a library module")
            elif name not in entries and not is_tool(name) and (target in entries or is_tool(target)):
                kind = "entry point" if target in entries else "tool or command"
                problems.append(f"library module {name} imports {kind} {target}")
    return problems


def config_libraries_imported(path: Path) -> set[str]:
    """Which of CONFIG_LIBRARIES the module at `path` imports anywhere (bar `if TYPE_CHECKING:`; a
    relative import, resolved against no package, names none of them)."""
    return {library for library in CONFIG_LIBRARIES for name in imported_names(path, "")
            if name == library or name.startswith(library + ".")}


def may_import_config_libraries(name: str, entries: set[str]) -> bool:
    return (name in entries or name in CONFIG_SIDE
            or any(name == package or name.startswith(package + ".") for package in CONFIG_SIDE_PACKAGES))


def config_import_violations(modules: dict[str, Path], entries: set[str]) -> list[str]:
    return [f"{name} imports {', '.join(sorted(found))}: only the loader (rookworld.app.config), the entry points, "
            f"tracking/ and sweep/ read the composed config; take a spec (rookworld/specs/) instead"
            for name, path in sorted(modules.items()) if not may_import_config_libraries(name, entries)
            for found in [config_libraries_imported(path)] if found]


def is_driver(name: str) -> bool:
    return name == DRIVER or name.startswith(DRIVER + ".")


def driver_violations(graph: dict[str, set[str]]) -> list[str]:
    """Modules outside the sweep package that import it."""
    return [f"{name} imports {target}: name what the sweep adds to a run by a config _target_ (rookworld/app/hooks.py)"
            for name, targets in sorted(graph.items()) if not is_driver(name)
            for target in sorted(targets) if is_driver(target)]


def within(name: str, packages: tuple[str, ...]) -> bool:
    return any(name == package or name.startswith(package + ".") for package in packages)


def folder_violations(graph: dict[str, set[str]]) -> list[str]:
    """Imports of the assembly (config, components, composition, errors, specs) from a library folder."""
    return [f"{name} imports {target}: a library folder takes plain values, not the run's assembly"
            for name, targets in sorted(graph.items()) if within(name, LIBRARY_FOLDERS)
            for target in sorted(targets) if within(target, ASSEMBLY)]


def stats_violations(modules: dict[str, Path]) -> list[str]:
    """Imports of a stats module beyond the standard library, numpy, scipy and the other stats modules
    (anywhere in the module, bar `if TYPE_CHECKING:`)."""
    return [f"{name} imports {found}: the statistics stay pure (the standard library, numpy, scipy, rookworld.stats)"
            for name, path in sorted(modules.items()) if within(name, (STATS,))
            for found in sorted(imported_names(path, name.rpartition(".")[0]))
            if found.split(".")[0] not in sys.stdlib_module_names and not within(found, STATS_MAY_IMPORT)]


def floor_of(name: str) -> int:
    """The floor of module `name`: its wing's (the first part below rookworld), by FLOORS."""
    room = name.split(".")[1] if "." in name else name
    return next(level for level, rooms in enumerate(FLOORS) if room in rooms)


def floor_violations(graph: dict[str, set[str]]) -> list[str]:
    """Imports from a lower floor to a higher one (bar `if TYPE_CHECKING:`)."""
    return [f"{name} imports {target}: floor {floor_of(name) + 1} imports floor {floor_of(target) + 1}, above it"
            for name, targets in sorted(graph.items()) if name != "rookworld"
            for target in sorted(targets) if target != "rookworld" and floor_of(target) > floor_of(name)]


def lobby_modules(root: Path = PACKAGE) -> list[str]:
    return sorted(path.stem for path in root.glob("*.py") if path.name != "__init__.py")


def outside_private_imports(modules: dict[str, Path]) -> list[str]:
    """Imports of another package's private module or name (`from pkg._impl import f`, `from pkg import _f`),
    anywhere in a module, bar `if TYPE_CHECKING:`: such a part may change or vanish in any release."""
    problems = []
    for name, path in sorted(modules.items()):
        for found in sorted(imported_names(path, name.rpartition(".")[0])):
            if not within(found, ("rookworld",)) and any(is_private(part) for part in found.split(".")):
                problems.append(f"{name} imports {found}: a private part of another package")
    return problems


def repeated_class_names(modules: dict[str, Path]) -> list[str]:
    """Class names defined in more than one module: each concept has one name, each name one concept."""
    where: dict[str, list[str]] = {}
    for name, path in sorted(modules.items()):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                where.setdefault(node.name, []).append(name)
    return [f"class {cls} is defined in {', '.join(names)}" for cls, names in sorted(where.items()) if len(names) > 1]


# ---------------------------------------------------------------- references outside the repository

def scanned_files() -> list[Path]:
    files = []
    for entry in SCANNED:
        path = REPO / entry
        candidates = [path] if path.is_file() else sorted(path.rglob("*"))
        files += [p for p in candidates if p.is_file() and p.suffix in TEXT_SUFFIXES and "__pycache__" not in p.parts]
    return files


def outside_references(path: Path) -> list[str]:
    problems = []
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        where = f"{path.relative_to(REPO)}:{number}"
        for what, pattern in OUTSIDE_REFERENCES.items():
            if pattern.search(line):
                problems.append(f"{where}: {what}: {line.strip()[:100]}")
        for match in PARENT_PATH.finditer(line):
            target = (path.parent / match.group(0)).resolve()
            if not target.is_relative_to(REPO):
                problems.append(f"{where}: a path outside the repository: {match.group(0)}")
    return problems


# ---------------------------------------------------------------- private names

def is_private(name: str) -> bool:
    """A leading underscore marks a name nobody outside its module uses; dunders and `_` are not such names."""
    return name.startswith("_") and name != "_" and not (name.startswith("__") and name.endswith("__"))


def defined_names(tree: ast.AST) -> set[str]:
    """The names a module defines: functions, classes, assigned names, import aliases and the attributes
    its classes set on `self` / `cls`."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.alias) and node.asname:
            names.add(node.asname)
        elif (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
              and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
            names.add(node.attr)
    return names


def last_name(node: ast.expr) -> str:
    return node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""


class PrivateUses(ast.NodeVisitor):
    """The private names of other modules one module uses: `x._name` and `from m import _name`."""

    def __init__(self, module: str, package: str, own: set[str], elsewhere: dict[str, set[str]],
                 other_classes: set[str], modules: dict[str, str]):
        self.module, self.package, self.own, self.elsewhere = module, package, own, elsewhere
        self.other_classes, self.modules = other_classes, modules
        self.found: list[tuple[int, str]] = []
        self.subclass_of_ours: list[bool] = [False]  # per enclosing class: does it extend another module's class?

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.subclass_of_ours.append(any(last_name(base) in self.other_classes for base in node.bases))
        self.generic_visit(node)
        self.subclass_of_ours.pop()

    def visit_Attribute(self, node: ast.Attribute) -> None:
        name = node.attr
        own_class = isinstance(node.value, ast.Name) and node.value.id in ("self", "cls") and not self.subclass_of_ours[-1]
        if is_private(name) and name not in self.own and name in self.elsewhere and not own_class:
            self.found.append((node.lineno, f"uses .{name} of {', '.join(sorted(self.elsewhere[name]))}"))
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        source = node.module or ""
        if node.level:
            anchor = self.package.split(".")[: len(self.package.split(".")) - node.level + 1]
            source = ".".join(anchor + ([source] if source else []))
        source = self.modules.get(source, "")
        if source and source != self.module:
            self.found += [(node.lineno, f"imports {alias.name} from {source}")
                           for alias in node.names if is_private(alias.name)]


def private_name_uses(root: Path, folders: tuple[str, ...], bare: tuple[str, ...] = ()) -> list[str]:
    """Every use of a private name outside the module that defines it, in the Python files under `folders`
    of `root`. Modules are named by their dotted path from `root`; those in a `bare` folder (on sys.path,
    as pytest puts tests/) also by their file name."""
    paths = {module_name(path, root): path for folder in folders for path in sorted((root / folder).rglob("*.py"))}
    trees = {name: ast.parse(path.read_text(), str(path)) for name, path in paths.items()}
    import_names = {**{path.stem: name for name, path in paths.items() if path.parent.name in bare},
                    **{name: name for name in paths}}
    own = {name: {n for n in defined_names(tree) if is_private(n)} for name, tree in trees.items()}
    classes = {name: {node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}
               for name, tree in trees.items()}
    problems = []
    for name, tree in trees.items():
        elsewhere: dict[str, set[str]] = {}
        for other, names in own.items():
            for private in names if other != name else ():
                elsewhere.setdefault(private, set()).add(other)
        other_classes = set().union(*(c for other, c in classes.items() if other != name))
        package = name if paths[name].name == "__init__.py" else name.rpartition(".")[0]
        visitor = PrivateUses(name, package, own[name], elsewhere, other_classes, import_names)
        visitor.visit(tree)
        where = paths[name].relative_to(root)
        problems += [f"{where}:{line}: {what}" for line, what in sorted(visitor.found)]
    return problems


# ---------------------------------------------------------------- the checks

def planted_package(tmp_path: Path, sources: dict[str, str]) -> Path:
    """A package `rookworld` under `tmp_path` of `sources` (path inside it -> text): a layout to plant a violation in."""
    root = tmp_path / "rookworld"
    for relative, text in sources.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text)
    return root


def test_no_import_cycles():
    cycle = find_cycle(import_graph(package_modules()))
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_library_imports_no_entry_point_or_tool():
    modules = package_modules()
    problems = layering_violations(import_graph(modules), entry_points(modules))
    assert not problems, "\n".join(problems)


def test_only_the_loader_entry_points_tracking_and_sweep_import_omegaconf_or_hydra():
    modules = package_modules()
    problems = config_import_violations(modules, entry_points(modules))
    assert not problems, "\n".join(problems)


def test_the_config_import_rule_fails_on_a_planted_violation(tmp_path):
    sources = {
        "__init__.py": "",
        "app/config.py": "from omegaconf import DictConfig\n",
        "train.py": "import hydra\nif __name__ == '__main__':\n    pass\n",
        "sweep/__init__.py": "",
        "sweep/study.py": "from hydra.core.hydra_config import HydraConfig\n",
        "run/trainer.py": "def fit():\n    from omegaconf import OmegaConf\n",  # the planted violation
        "judge/rollout.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from omegaconf import DictConfig\n",
    }
    root = planted_package(tmp_path, sources)
    modules = package_modules(root)
    problems = config_import_violations(modules, entry_points(modules))
    assert len(problems) == 1 and problems[0].startswith("rookworld.run.trainer imports omegaconf"), problems


def test_the_library_folders_import_nothing_of_the_assembly():
    problems = folder_violations(import_graph(package_modules()))
    assert not problems, "\n".join(problems)


def test_the_folder_rule_fails_on_a_planted_violation(tmp_path):
    sources = {
        "__init__.py": "", "app/config.py": "", "app/errors.py": "", "specs/__init__.py": "", "specs/run.py": "",
        "grpo/__init__.py": "", "tasks/__init__.py": "", "run/trainer.py": "from rookworld.specs.run import RunSpec\n",
        "grpo/learner.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from rookworld.specs.run import RunSpec\n",
        "tasks/policy.py": "def score():\n    from rookworld.app.errors import as_command\n",  # the planted violation
    }
    root = planted_package(tmp_path, sources)
    assert folder_violations(import_graph(package_modules(root))) == [
        "rookworld.tasks.policy imports rookworld.app.errors: a library folder takes plain values, not the run's assembly"]


def test_the_statistics_import_no_optuna_hydra_mlflow_or_sweep():
    problems = stats_violations(package_modules())
    assert not problems, "\n".join(problems)


def test_the_statistics_rule_fails_on_a_planted_violation(tmp_path):
    sources = {
        "__init__.py": "", "stats/__init__.py": "",
        "stats/paired.py": "import math\nimport numpy as np\nfrom scipy import stats\n",
        "stats/racing.py": "from rookworld.stats.paired import compare\nfrom rookworld.data.records import read_jsonl\n",
        "stats/verdict.py": "def confirm():\n    from optuna.trial import TrialState\n",  # the planted violations
        "stats/stages.py": "from rookworld.sweep.staged.stages import Item\n",
        "sweep/__init__.py": "import optuna\n",
    }
    root = planted_package(tmp_path, sources)
    assert [problem.split(":")[0] for problem in stats_violations(package_modules(root))] == [
        "rookworld.stats.racing imports rookworld.data.records",
        "rookworld.stats.racing imports rookworld.data.records.read_jsonl",
        "rookworld.stats.stages imports rookworld.sweep.staged.stages",
        "rookworld.stats.stages imports rookworld.sweep.staged.stages.Item",
        "rookworld.stats.verdict imports optuna.trial",
        "rookworld.stats.verdict imports optuna.trial.TrialState",
    ]


def test_no_import_runs_up_a_floor_and_the_lobby_stays_small():
    problems = floor_violations(import_graph(package_modules()))
    assert not problems, "\n".join(problems)
    lobby = lobby_modules()
    assert len(lobby) <= LOBBY_LIMIT, f"{len(lobby)} loose modules in rookworld/ (at most {LOBBY_LIMIT}): {lobby}"
    assert {room for rooms in FLOORS for room in rooms} >= {p.name for p in PACKAGE.iterdir()
                                                           if p.is_dir() and (p / "__init__.py").exists()} | set(lobby)


def test_the_floor_rule_fails_on_a_planted_violation(tmp_path):
    sources = {"__init__.py": "", "tasks/__init__.py": "", "run/__init__.py": "", "judge/__init__.py": "",
               "run/trainer.py": "from rookworld.judge.rollout import generate\n",
               "judge/rollout.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from rookworld.run.trainer import T\n",
               "tasks/policy.py": "def score():\n    from rookworld.run.trainer import Trainer\n",  # the planted violation
               **{f"loose_{n}.py": "" for n in range(LOBBY_LIMIT + 1)}}
    root = planted_package(tmp_path, sources)
    assert [p.split(":")[0] for p in floor_violations(import_graph(package_modules(root)))] == [
        "rookworld.tasks.policy imports rookworld.run.trainer"]
    assert len(lobby_modules(root)) == LOBBY_LIMIT + 1  # the lobby check's count


def test_no_module_imports_a_private_part_of_another_package():
    problems = outside_private_imports(package_modules())
    assert not problems, "\n".join(problems)


def test_the_private_import_rule_fails_on_a_planted_violation(tmp_path):
    sources = {
        "__init__.py": "", "space.py": "from hydra_plugins.hydra_optuna_sweeper._impl import create\n",
        "kl.py": "from rookworld.grpo import _clamp\nfrom __future__ import annotations\n",  # our own: the name rule's
        "loss.py": "def f():\n    from torch import _C\n",
        "ok.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from torch._prims import x\n",
    }
    root = planted_package(tmp_path, sources)
    assert [p.split(":")[0] for p in outside_private_imports(package_modules(root))] == [
        "rookworld.loss imports torch._C", "rookworld.space imports hydra_plugins.hydra_optuna_sweeper._impl",
        "rookworld.space imports hydra_plugins.hydra_optuna_sweeper._impl.create"]


def test_every_class_name_is_defined_once():
    problems = repeated_class_names(package_modules())
    assert not problems, "\n".join(problems)


def test_the_class_name_rule_fails_on_a_planted_violation(tmp_path):
    sources = {"__init__.py": "", "specs/__init__.py": "", "specs/guards.py": "class Guards:\n    pass\n",
               "grpo/guards.py": "class Guards:\n    class Inner:\n        pass\n", "run/trainer.py": "class Inner:\n    pass\n"}
    root = planted_package(tmp_path, sources)
    assert repeated_class_names(package_modules(root)) == [
        "class Guards is defined in rookworld.grpo.guards, rookworld.specs.guards",
        "class Inner is defined in rookworld.grpo.guards, rookworld.run.trainer"]


def test_nothing_outside_the_sweep_imports_it():
    problems = driver_violations(import_graph(package_modules()))
    assert not problems, "\n".join(problems)


def test_the_driver_check_sees_a_planted_import(tmp_path):
    planted = tmp_path / "components.py"
    planted.write_text("def build_hooks(cfg):\n    from rookworld.sweep.job.pruning import OptunaPruningHook\n")
    modules = {"rookworld.run.build": planted, "rookworld.sweep.job.pruning": tmp_path / "pruning.py",
               "rookworld.sweep.storage.study": tmp_path / "study.py", "rookworld.app.config": tmp_path / "config.py"}
    graph = {"rookworld.run.build": imported_modules("rookworld.run.build", planted, modules),
             "rookworld.sweep.job.pruning": {"rookworld.sweep.storage.study", "rookworld.app.config"}}
    assert driver_violations(graph) == ["rookworld.run.build imports rookworld.sweep.job.pruning: name what the sweep "
                                        "adds to a run by a config _target_ (rookworld/app/hooks.py)"]


def test_the_user_commands_are_entry_points():
    entries = entry_points(package_modules())
    for command in ("rookworld.train", "rookworld.sft.__main__", "rookworld.bench.__main__", "rookworld.commands.annotate",
                    "rookworld.sweep.__main__", "rookworld.play"):
        assert command in entries


def test_no_reference_outside_the_repository():
    problems = [problem for path in scanned_files() for problem in outside_references(path)]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("source, expected", [
    ("import rookworld.b\n", {"rookworld.b"}),
    ("def f():\n    from rookworld import b\n", {"rookworld", "rookworld.b"}),
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import rookworld.b\n", set()),
])
def test_imports_count_at_module_and_function_level(tmp_path, source, expected):
    path = tmp_path / "a.py"
    path.write_text(source)
    modules = {"rookworld": tmp_path / "__init__.py", "rookworld.a": path, "rookworld.b": tmp_path / "b.py"}
    assert imported_modules("rookworld.a", path, modules) == expected


def test_the_checks_see_a_cycle_and_a_layering_violation():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    graph = {"rookworld.judge.rollout": {"rookworld.train"}, "rookworld.train": set(), "rookworld.sft": {"rookworld.train"}}
    problems = layering_violations(graph, {"rookworld.train", "rookworld.sft"})
    assert len(problems) == 2



def test_the_layering_check_sees_a_library_module_importing_a_command():
    graph = {"rookworld.run.trainer": {"rookworld.commands.derived"}, "rookworld.commands.derived": {"rookworld.data.records"},
             "rookworld.commands.mirror": {"rookworld.commands.derived", "rookworld.data.mirror"},
             "rookworld.data.mirror": {"rookworld.data.records"}, "rookworld.data.records": set()}
    assert layering_violations(graph, {"rookworld.commands.mirror"}) == [
        "library module rookworld.run.trainer imports tool or command rookworld.commands.derived"]

def test_no_private_name_is_used_outside_its_module():
    problems = private_name_uses(REPO, PYTHON_FOLDERS, bare=ON_SYS_PATH)
    assert not problems, "\n".join(problems)


PLANTED = {
    "pkg/__init__.py": "",
    "pkg/engine.py": (
        "def _helper():\n"
        "    return 1\n"
        "\n"
        "class Engine:\n"
        "    def __init__(self):\n"
        "        self._state = _helper()\n"
        "\n"
        "    def _step(self):\n"
        "        return self._state, self.__class__\n"
    ),
    "pkg/driver.py": (
        "from pkg.engine import Engine, _helper\n"
        "from pkg import engine\n"
        "from outside import Base\n"
        "\n"
        "class Child(Engine):\n"
        "    def run(self):\n"
        "        return self._step()\n"
        "\n"
        "class Adapter(Base):\n"
        "    def run(self):\n"
        "        return self._state\n"
        "\n"
        "def drive(machine):\n"
        "    machine._state = engine._helper()\n"
        "    return machine.__dict__, _helper\n"
    ),
    "tests/helpers.py": "def _fixture():\n    return 2\n",
    "tests/test_engine.py": "from helpers import _fixture\n",
}


def test_the_private_name_check_sees_each_kind_of_use_from_another_module(tmp_path):
    """Imported, read through a module, set on an object, called on a subclass of another module's class:
    each reported once; the module's own uses, dunders and a subclass of an outside class are not."""
    for name, source in PLANTED.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(source)
    assert private_name_uses(tmp_path, ("pkg", "tests"), bare=("tests",)) == [
        "pkg/driver.py:1: imports _helper from pkg.engine",
        "pkg/driver.py:7: uses ._step of pkg.engine",
        "pkg/driver.py:14: uses ._helper of pkg.engine",
        "pkg/driver.py:14: uses ._state of pkg.engine",
        "tests/test_engine.py:1: imports _fixture from tests.helpers",
    ]
