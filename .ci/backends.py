#!/usr/bin/env python3
"""The repository's distributions, read from backends.toml, for the scripts and tox.

    python3 .ci/backends.py dirs            ./ironaccel-core ./ironaccel-cuda ... (install order)
    python3 .ci/backends.py names [KEY]     backend and extension names, only those with KEY = true (ci, h200, typed)
    python3 .ci/backends.py pip             pip arguments installing every distribution editable, with its extras
    python3 .ci/backends.py wheels          pip arguments installing every distribution's wheel from dist/, extras too
    python3 .ci/backends.py tests           every test path, for one pytest run ([repo] tests last)
    python3 .ci/backends.py typed           the src folders mypy checks
    python3 .ci/backends.py tox             tox.ini, generated (python3 .ci/backends.py tox > tox.ini)
    python3 .ci/backends.py check           every list kept elsewhere agrees with backends.toml; else exit 1

`names` and `typed` take --sep "," to join with something else than a space.
Standard library only (tomllib, or tomli on Python 3.10), so it runs before any install.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from dataclasses import dataclass
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = ROOT / "backends.toml"
SCRIPTS = ("setup", "test", "type", "run", "h200", "wheels")


@dataclass(frozen=True)
class Dist:
    name: str  # "core" or the backend name
    install: str = ""
    extras: tuple[str, ...] = ()
    tests: tuple[str, ...] = ()
    ci: bool = False
    h200: bool = False
    typed: bool = False
    plugin: bool = True  # a backend (an ironaccel.backends entry point); False: an [extensions.NAME] distribution

    @property
    def dir(self) -> str:
        return f"ironaccel-{self.name}"

    @property
    def package(self) -> str:
        return "ironaccel" if self.name == "core" else f"ironaccel_{self.name.replace('-', '_')}"

    @property
    def spec(self) -> str:
        """What pip installs (editable), extras included."""
        return f"./{self.dir}[{','.join(self.extras)}]" if self.extras else f"./{self.dir}"

    @property
    def test_paths(self) -> list[str]:
        return [f"{self.dir}/tests", *(f"{self.dir}/{t}" for t in self.tests)]


def load(path: Path = MANIFEST) -> list[Dist]:
    """The core distribution, then every backend, then every extension, in the manifest's order."""
    doc = tomllib.loads(path.read_text())
    known = {"install", "extras", "tests", "ci", "h200", "typed"}
    dists = [Dist("core", typed=bool(doc.get("core", {}).get("typed", False)))]
    for section in ("backends", "extensions"):
        for name, entry in doc.get(section, {}).items():
            unknown = set(entry) - known
            if unknown:
                raise SystemExit(f"backends.toml: [{section}.{name}] has unknown keys {sorted(unknown)}")
            dists.append(Dist(name, entry.get("install", ""), tuple(entry.get("extras", ())),
                              tuple(entry.get("tests", ())), bool(entry.get("ci")), bool(entry.get("h200")),
                              bool(entry.get("typed")), section == "backends"))
    return dists


def repo_tests(path: Path = MANIFEST) -> list[str]:
    """Test paths of no distribution ([repo] tests, relative to the repository): the shared bench/."""
    return list(tomllib.loads(path.read_text()).get("repo", {}).get("tests", []))


def backends(dists: list[Dist]) -> list[Dist]:
    return [d for d in dists if d.name != "core" and d.plugin]


def required(dists: list[Dist], key: str) -> str:
    return ",".join(d.name for d in backends(dists) if getattr(d, key))


def tox_ini(dists: list[Dist], extra_tests: list[str]) -> str:
    """tox.ini: one env per backend (core plus that backend), all (with `extra_tests`, the [repo] tests), core
    alone, lint and type."""
    names = [d.name for d in backends(dists)]
    typed = " ".join(f"{d.dir}/src" for d in dists if d.typed)
    out = [
        "# GENERATED from backends.toml by `python3 .ci/backends.py tox > tox.ini`; edit backends.toml instead.",
        "# One env per backend (core + that backend only), one with everything, a core-alone env that",
        "# checks the not-installed messages, and lint + type-check envs.  The backends that run for real",
        "# on a CPU machine are required there (IRONACCEL_REQUIRE), as in .ci/test.",
        "#   tox            every env        tox -e vulkan      one backend",
        "[tox]",
        f"env_list = core, {', '.join(names)}, all, lint, type",
        "skip_missing_interpreters = true",
        "",
        "[testenv]",
        "skip_install = true",
        "pass_env = IRONACCEL_*, VK_*, CUDA_*, LD_LIBRARY_PATH",
        "set_env =",
        "    XDG_RUNTIME_DIR = {env_tmp_dir}",
        "deps =",
        "    pytest",
        "    -e ./ironaccel-core",
        "commands = python -m pytest -q -rs ironaccel-core/tests {posargs}",
    ]
    for d in backends(dists):
        out += ["", f"[testenv:{d.name}]", "deps =", "    {[testenv]deps}", f"    -e {d.spec}"]
        if d.ci:
            out += _require(d.name)
        out.append(f"commands = python -m pytest -q -rs ironaccel-core/tests/test_not_installed.py "
                   f"{' '.join(d.test_paths)} {{posargs}}")
    paths = [p for d in dists for p in d.test_paths] + extra_tests
    out += ["", "[testenv:all]", "deps =", "    pytest", *(f"    -e {d.spec}" for d in dists),
            *_require(required(dists, "ci")),
            "commands = python -m pytest -q -rs " + " \\\n    ".join(_wrap(paths)) + " {posargs}",
            "", "[testenv:lint]", "deps = ruff", "commands = ruff check .",
            "", "[testenv:type]", "deps =", "    mypy", "    numpy", "    pluggy", "    pytest",
            f"commands = mypy {typed}", ""]
    return "\n".join(out)


def _require(names: str) -> list[str]:
    """set_env lines requiring `names` (IRONACCEL_REQUIRE), unless the caller's environment sets it."""
    return ["set_env =", "    {[testenv]set_env}", f"    IRONACCEL_REQUIRE = {{env:IRONACCEL_REQUIRE:{names}}}"]


def _wrap(words: list[str], width: int = 100) -> list[str]:
    lines: list[str] = []
    for word in words:
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines


# -- check ------------------------------------------------------------------------------------


def check(dists: list[Dist], root: Path = ROOT) -> list[str]:
    """What disagrees with backends.toml; empty when everything follows it."""
    problems: list[str] = []
    on_disk = sorted(p.name for p in root.glob("ironaccel-*") if (p / "pyproject.toml").is_file())
    if on_disk != sorted(d.dir for d in dists):
        problems.append(f"backends.toml lists {sorted(d.dir for d in dists)}, the repository has {on_disk}")
    extra = repo_tests(root / "backends.toml")
    problems.extend(f"backends.toml's [repo] test {t} does not exist" for t in extra if not (root / t).exists())
    tox = root / "tox.ini"
    if not tox.is_file() or tox.read_text() != tox_ini(dists, extra):
        problems.append("tox.ini is not what backends.toml generates: run `python3 .ci/backends.py tox > tox.ini`")
    isort = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["ruff"]["lint"]["isort"]
    if isort.get("known-first-party") != [d.package for d in dists]:
        problems.append(f"pyproject.toml [tool.ruff.lint.isort] known-first-party is {isort.get('known-first-party')}, "
                        f"backends.toml says {[d.package for d in dists]}")
    first_party = _assigned(root / "ironaccel-core/src/ironaccel/registry.py", "FIRST_PARTY")
    expected = {d.name: d.install for d in backends(dists)}
    if first_party != expected:
        problems.append(f"FIRST_PARTY in ironaccel/registry.py is {first_party}, backends.toml says {expected}")
    for d in dists:
        problems.extend(_check_dist(d, root))
    problems.extend(_check_scripts(dists, root))
    readme = (root / "README.md").read_text()
    problems.extend(f"README.md's table of pieces does not list {d.dir}" for d in dists
                    if f"| `{d.dir}` | `{d.package}` |" not in readme)
    return problems


def _check_dist(d: Dist, root: Path) -> list[str]:
    problems = []
    folder = root / d.dir
    project = tomllib.loads((folder / "pyproject.toml").read_text())
    if project["project"]["name"] != d.dir:
        problems.append(f"{d.dir}/pyproject.toml names the distribution {project['project']['name']!r}")
    if not (folder / "src" / d.package / "py.typed").is_file():
        problems.append(f"{d.dir}/src/{d.package}/py.typed is missing")
    data = project.get("tool", {}).get("setuptools", {}).get("package-data", {})
    if "py.typed" not in data.get(d.package, []):
        problems.append(f"{d.dir}/pyproject.toml does not ship py.typed ([tool.setuptools.package-data] {d.package})")
    extras = set(project["project"].get("optional-dependencies", {}))
    if not set(d.extras) <= extras:
        problems.append(f"{d.dir} has no extras {sorted(set(d.extras) - extras)} (backends.toml asks for them)")
    problems.extend(f"{d.dir}/{t} does not exist" for t in d.tests if not (folder / t).exists())
    if d.name != "core" and d.plugin:
        points = project["project"].get("entry-points", {}).get("ironaccel.backends", {})
        if points != {d.name: f"{d.package}.plugin"}:
            problems.append(f"{d.dir}'s ironaccel.backends entry point is {points}, not {d.name} = {d.package}.plugin")
        installs = _spec_keywords(folder / "src" / d.package / "plugin.py", "install")
        if installs != [d.install]:
            problems.append(f"{d.dir}'s plugin sets BackendSpec install={installs}, backends.toml says {d.install!r}")
    return problems


def _check_scripts(dists: list[Dist], root: Path) -> list[str]:
    """No .ci script keeps a list of its own: a line naming three or more backends is one."""
    names = [d.name for d in backends(dists)]
    problems = []
    for script in SCRIPTS:
        path = root / ".ci" / script
        if not path.is_file():
            problems.append(f".ci/{script} is missing")
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            found = {n for n in names if re.search(rf"(?<![\w.]){n}(?!\w)", line)}
            if len(found) >= 3:
                problems.append(f".ci/{script}:{number} lists backends by hand ({', '.join(sorted(found))}); "
                                "read them from backends.toml with .ci/backends.py")
    return problems


def _assigned(path: Path, name: str) -> object:
    for node in ast.walk(ast.parse(path.read_text())):
        target = node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        if isinstance(target, ast.Name) and target.id == name and node.value is not None:  # type: ignore[union-attr]
            return ast.literal_eval(node.value)  # type: ignore[union-attr]
    return None


def _spec_keywords(path: Path, keyword: str) -> list[object]:
    values = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "BackendSpec":
            values.extend(ast.literal_eval(k.value) for k in node.keywords if k.arg == keyword)
    return values


def _wheel(d: Dist, folder: Path = ROOT / "dist") -> str:
    """The one wheel of `d` in `folder` (built by .ci/wheels), with its extras."""
    found = sorted(folder.glob(f"{d.dir.replace('-', '_')}-*.whl"))
    if len(found) != 1:
        raise SystemExit(f"expected one {d.dir} wheel in {folder}, found {[p.name for p in found]}")
    return f"{found[0]}[{','.join(d.extras)}]" if d.extras else str(found[0])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=".ci/backends.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["dirs", "names", "pip", "wheels", "tests", "typed", "tox", "check"])
    parser.add_argument("key", nargs="?", choices=["ci", "h200", "typed"], help="names: only those with KEY = true")
    parser.add_argument("--sep", default=" ")
    args = parser.parse_args(argv)
    dists = load()
    if args.command == "dirs":
        print(" ".join(f"./{d.dir}" for d in dists))
    elif args.command == "names":
        print(args.sep.join(d.name for d in dists[1:] if args.key is None or getattr(d, args.key)))
    elif args.command == "pip":
        print(" ".join(f"-e {d.spec}" for d in dists))
    elif args.command == "wheels":
        print(" ".join(_wheel(d) for d in dists))
    elif args.command == "tests":
        print(" ".join([p for d in dists for p in d.test_paths] + repo_tests()))
    elif args.command == "typed":
        print(args.sep.join(f"{d.dir}/src" for d in dists if d.typed))
    elif args.command == "tox":
        sys.stdout.write(tox_ini(dists, repo_tests()))
    else:
        problems = check(dists)
        for problem in problems:
            print(problem)
        return 1 if problems else 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
