"""Release checks: the metadata agrees with VERSION everywhere (.ci/release.py check) and bump rewrites every
copy; every STATUS.md row names a test that exists; the backend guide's code is a plugin that passes the kit."""

from __future__ import annotations

import ast
import importlib.util
import io
import os
import re
import shutil
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("ironaccel_release", ROOT / ".ci" / "release.py")
assert spec is not None and spec.loader is not None
release = importlib.util.module_from_spec(spec)
spec.loader.exec_module(release)


def test_every_distribution_carries_the_one_version_license_and_metadata():
    assert release.problems() == []


def test_bump_rewrites_every_copy_and_check_then_wants_a_changelog_section(tmp_path, monkeypatch):
    copy = tmp_path / "repo"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(".git", ".venv*", "dist*", "build", "*.so", "docs"))
    monkeypatch.setattr(release, "ROOT", copy)
    monkeypatch.setattr(release, "VERSION_FILE", copy / "VERSION")
    release.bump("9.8.7")
    found = release.problems()
    assert found == ["CHANGELOG.md has no '## [9.8.7]' section"]
    assert '"ironaccel-core>=9.8"' in (copy / "ironaccel-vulkan" / "pyproject.toml").read_text()
    assert '__version__ = "9.8.7"' in (copy / "ironaccel-cuda" / "src" / "ironaccel_cuda" / "__init__.py").read_text()


def test_a_distribution_that_disagrees_is_named(tmp_path, monkeypatch):
    copy = tmp_path / "repo"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(".git", ".venv*", "dist*", "build", "*.so", "docs"))
    monkeypatch.setattr(release, "ROOT", copy)
    monkeypatch.setattr(release, "VERSION_FILE", copy / "VERSION")
    (copy / "ironaccel-qnn" / "LICENSE").unlink()
    pyproject = copy / "ironaccel-webgpu" / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('version = "0.2.0"', 'version = "0.1.9"', 1))
    found = release.problems()
    assert "ironaccel-qnn/LICENSE missing or not the repository's LICENSE" in found
    assert any(line.startswith("ironaccel-webgpu/pyproject.toml: version '0.1.9'") for line in found)


# -- STATUS.md: every claim names a test that exists -------------------------------------------------------

STATUS = ROOT / "STATUS.md"
#: Where a method named on a conformance class may be inherited from: the kits in core.
KITS = sorted((ROOT / "ironaccel-core" / "src" / "ironaccel" / "testing").glob("*.py"))


def status_rows(text: str) -> list[tuple[int, list[str]]]:
    """(line number, cells) of every table row of STATUS.md but the header and separator rows."""
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.startswith("|") or set(line) <= set("|-: "):
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if cells[0] == "claim":
            continue
        rows.append((number, cells))
    return rows


def _classes(path: Path) -> dict[str, ast.ClassDef]:
    return {node.name: node for node in ast.parse(path.read_text()).body if isinstance(node, ast.ClassDef)}


def _has_member(cls: ast.ClassDef, name: str, module_classes: dict[str, ast.ClassDef], depth: int = 0) -> bool:
    """`name` is defined in `cls` or in one of its bases (in the same file, or one of core's testing kits)."""
    if any(getattr(node, "name", None) == name or _matches(getattr(node, "name", ""), name) for node in cls.body):
        return True
    if depth > 5:
        return False
    for base in cls.bases:
        base_name = base.id if isinstance(base, ast.Name) else base.attr if isinstance(base, ast.Attribute) else ""
        for classes in [module_classes] + [_classes(kit) for kit in KITS]:
            if base_name in classes and _has_member(classes[base_name], name, classes, depth + 1):
                return True
    return False


def _matches(found: str, wanted: str) -> bool:
    """A trailing `*` names every test with that prefix (at least one must exist)."""
    return wanted.endswith("*") and found.startswith(wanted[:-1])


def missing_reference(ref: str) -> str | None:
    """Why `path[::name[::member]]` names nothing, or None when it exists.  A Python file is parsed (a
    function or class at module level, then a member of that class, inherited from the kits allowed); any
    other file (C, shell) must contain the name as a word."""
    path_text, *names = ref.split("::")
    path = ROOT / path_text
    if not path.exists():
        return f"{path_text} does not exist"
    if not names:
        return None
    if path.suffix != ".py":
        pattern = names[-1].replace("*", r"\w*")
        return None if re.search(rf"\b{pattern}\b", path.read_text()) else f"{path_text} has no {names[-1]}"
    tree = ast.parse(path.read_text())
    top = [node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    first = [node for node in top if node.name == names[0] or _matches(node.name, names[0])]
    if not first:
        return f"{path_text} has no {names[0]}"
    if len(names) == 1:
        return None
    classes = _classes(path)
    if not any(isinstance(node, ast.ClassDef) and _has_member(node, names[1], classes) for node in first):
        return f"{path_text}::{names[0]} has no {names[1]}"
    return None


def status_problems(text: str) -> list[str]:
    """Rows of STATUS.md that are not claim | test | where it ran, or name a test that does not exist."""
    problems = []
    for number, cells in status_rows(text):
        if len(cells) != 3:
            problems.append(f"STATUS.md:{number}: {len(cells)} cells, not claim | test | where it ran")
            continue
        claim, tests, where = cells
        refs = [ref for ref in re.findall(r"`([^`]+)`", tests) if "/" in ref or "::" in ref]
        if not refs and "no test" not in tests:
            problems.append(f"STATUS.md:{number}: names no test (write `path::name`, or say 'no test')")
        if not claim or not where:
            problems.append(f"STATUS.md:{number}: an empty claim or 'where it ran'")
        # Dates and run names nowhere in a row; timings not as where it ran (a claim may state a target).
        if re.search(r"\b20\d\d-\d\d-\d\d\b|\b(session|call) \d+", " ".join(cells)) or re.search(
                r"\b\d+(\.\d+)? ?(us|ms|s|µs)\b", where + tests):
            problems.append(f"STATUS.md:{number}: a date, run name or timing in a row")
        problems += [f"STATUS.md:{number}: {why}" for why in filter(None, map(missing_reference, refs))]
    return problems


def test_every_status_row_names_a_test_that_exists():
    text = STATUS.read_text()
    assert status_problems(text) == []
    assert len(status_rows(text)) > 50
    # One "last run" line per machine, before the first table (RELEASING.md's step 1 reads them): CI's, the
    # H200's, and the H100's where that card stood in for it.
    machines = re.findall(r"^\*\*Last run, (.+?):\*\*", text.split("\n|", 1)[0], re.MULTILINE)
    assert machines[:2] == ["CI CPU machine", "NVIDIA H200"] and machines[2:] in ([], ["NVIDIA H100"])


def test_status_check_catches_a_missing_test_file_function_or_member():
    header = "| claim | test | where it ran |\n|---|---|---|\n"
    good = header + "| the kit | `ironaccel-core/src/ironaccel/testing/execution.py::ExecutionConformance` | CI |\n"
    assert status_problems(good) == []
    cases = {
        "`ironaccel-core/tests/no_such_file.py`": "does not exist",
        "`.ci/test_release.py::test_no_such_function`": "has no test_no_such_function",
        "`ironaccel-webgpu/tests/test_conformance.py::TestWebGPUCompute::test_nope`": "has no test_nope",
        "`.ci/test_release.py::test_nothing_starts_like_this*`": "has no",
        "nothing named": "names no test",
    }
    for cell, why in cases.items():
        found = status_problems(header + f"| a claim | {cell} | CI |\n")
        assert len(found) == 1 and why in found[0], (cell, found)
    inherited = "`ironaccel-webgpu/tests/test_conformance.py::TestWebGPUCompute::test_fence_rules`"
    assert status_problems(header + f"| fences | {inherited} | CI |\n") == []
    assert status_problems(header + "| a claim | no test | nowhere |\n") == []
    assert "date" in status_problems(header + "| c | `.ci/test_release.py` | H200 (2026-12-01) |\n")[0]
    assert "date" in status_problems(header + "| c, session 12 | `.ci/test_release.py` | H200 |\n")[0]
    assert "timing" in status_problems(header + "| c | `.ci/test_release.py` | H200 (1.2 ms) |\n")[0]


# -- shipped source: no dates or machine names in its comments and docstrings -------------------------------
# Evidence (when, on which machine, how fast) lives in bench/: a comment keeps the finding in words and names the
# experiment.  Timings are not checked here (a spin of 200 us is a design parameter); dates and machines are.

SOURCE_PATTERNS = ("ironaccel-*/src/*.py", "ironaccel-*/native/*", "*.pyx", "*.pxi", "*.c", "*.h")
SOURCE_SUFFIXES = (".py", ".pyx", ".pxi", ".c", ".h")
_DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
_MACHINE = re.compile(r"\bH[12]00\b")
#: A list of models ("an H100 or H200", "H100/H200") names a class of parts, not the machine something ran on.
_MODEL_LIST = re.compile(r"\bH[12]00(?:\s*(?:/|,|or)\s*H[12]00\b)+")


def shipped_sources() -> list[str]:
    """The tracked source files the wheels ship: no test or bench folder, not the generated _core.c."""
    listed = subprocess.run(["git", "ls-files", "-z", "--", *SOURCE_PATTERNS], cwd=ROOT, capture_output=True)
    if listed.returncode:
        pytest.skip(f"not a git checkout: {listed.stderr.decode(errors='replace').strip()}")
    paths = []
    for path in sorted(set(listed.stdout.decode().split("\0")) - {""}):
        parts = path.split("/")
        if not path.endswith(SOURCE_SUFFIXES) or parts[-1] == "_core.c" or parts[-1].startswith("test_") or any(
                part == "bench" or part.endswith("tests") for part in parts[:-1]):
            continue
        paths.append(path)
    return paths


def _python_notes(text: str) -> list[tuple[int, str]]:
    """(line, text) of every comment and docstring (a string that is a statement of its own) of Python or
    Cython source; where the tokenizer gives up, every line."""
    notes: list[tuple[int, str]] = []
    try:
        tokens = [t for t in tokenize.generate_tokens(io.StringIO(text).readline)
                  if t.type not in (tokenize.NL, tokenize.ENCODING)]
    except (tokenize.TokenError, SyntaxError):
        return list(enumerate(text.splitlines(), 1))
    starts = (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)
    code = [t for t in tokens if t.type != tokenize.COMMENT]
    for i, token in enumerate(code):
        alone = (i == 0 or code[i - 1].type in starts) and (
            i + 1 == len(code) or code[i + 1].type in (tokenize.NEWLINE, tokenize.ENDMARKER))
        if token.type == tokenize.STRING and alone:
            notes += [(token.start[0] + k, line) for k, line in enumerate(token.string.splitlines())]
    notes += [(t.start[0], t.string) for t in tokens if t.type == tokenize.COMMENT]
    return notes


def _c_notes(text: str) -> list[tuple[int, str]]:
    """(line, text) of every comment of C source (string and character literals skipped)."""
    notes: list[tuple[int, str]] = []
    i, line, n = 0, 1, len(text)
    while i < n:
        c = text[i]
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            i = j + 1 if j < n and text[j] == c else j  # an unclosed literal ends at its line's end
            continue
        if text.startswith("//", i) or text.startswith("/*", i):
            block = text[i + 1] == "*"
            end = text.find("*/" if block else "\n", i + 2)
            end = n if end < 0 else end + 2 if block else end
            notes += [(line + k, part) for k, part in enumerate(text[i:end].split("\n"))]
            line += text.count("\n", i, end)
            i = end
            continue
        line += c == "\n"
        i += 1
    return notes


def source_problems(path: str, text: str) -> list[str]:
    """`path:line:` for each comment or docstring line of `text` that holds a date or names a machine."""
    notes = _c_notes(text) if path.endswith((".c", ".h")) else _python_notes(text)
    problems = []
    for number, note in sorted(notes):
        if _DATE.search(note):
            problems.append(f"{path}:{number}: a date in a comment or docstring: {note.strip()}")
        machine = _MACHINE.search(_MODEL_LIST.sub("", note))
        if machine:
            problems.append(f"{path}:{number}: a machine ({machine.group()}) in a comment or docstring: "
                            f"{note.strip()}")
    return problems


def test_shipped_source_has_no_dates_or_machine_names_in_comments():
    paths = shipped_sources()
    assert len(paths) > 100 and "ironaccel-cuda/native/fence.h" in paths
    found = [problem for path in paths for problem in source_problems(path, (ROOT / path).read_text())]
    assert found == [], "\n".join(found)


def test_source_check_catches_a_planted_date_or_machine():
    python = ('"""A module."""\nx = 1  # fine\n\n\n'
              'def f():\n    """Seen on the H200."""\n    return "H200"  # 2026-12-01\n')
    assert source_problems("a.py", python) == [
        'a.py:6: a machine (H200) in a comment or docstring: """Seen on the H200."""',
        "a.py:7: a date in a comment or docstring: # 2026-12-01"]
    c = 'const char* s = "H100 // 2026-01-01";\n/* measured\n * on the H100 */\nint x;  // fine\n'
    assert source_problems("a.c", c) == ["a.c:3: a machine (H100) in a comment or docstring: * on the H100 */"]
    assert source_problems("a.pxi", "cdef int f():\n    # (9, 0) for an H100 or H200, H100/H200\n") == []
    assert source_problems("b.py", "x = 1  # ran on the H100 (see H100/H200)\n") != []


# -- the backend guide: its code, copied as it stands, is a plugin that passes the conformance kit ---------

GUIDE = ROOT / "docs" / "guides" / "writing-a-backend.md"
_FILE_NAMED = re.compile(r"`([\w./-]+\.(?:py|toml))`")


def guide_files(text: str) -> dict[str, str]:
    """{path: code} of the guide's blocks whose paragraph above names a file (`pyproject.toml`,
    `mydev_ironaccel/plugin.py`, ...): the first backticked file name of the prose before the block."""
    files: dict[str, str] = {}
    prose: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            end = lines.index("```", i + 1)
            named = _FILE_NAMED.search(" ".join(prose))
            if named:
                files[named.group(1)] = "\n".join(lines[i + 1:end]) + "\n"
            prose, i = [], end + 1
            continue
        if line.startswith("#"):
            prose = []
        elif line.strip() and not line.startswith("<!--"):
            prose.append(line)
        i += 1
    return files


def test_the_guides_plugin_passes_the_conformance_kit_first_time(tmp_path):
    files = guide_files(GUIDE.read_text())
    assert set(files) == {"pyproject.toml", "mydev_ironaccel/plugin.py", "mydev_ironaccel/backend.py",
                          "tests/test_mydev.py"}, sorted(files)
    project = tmp_path / "mydev"
    for name, code in files.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(code)
    (project / "mydev_ironaccel" / "__init__.py").write_text("")
    tests = tmp_path / "tests"
    (project / "tests").rename(tests)  # the tests are not part of the distribution
    site = tmp_path / "site"
    install(project, site)
    assert list(site.glob("mydev_ironaccel-0.1.0.dist-info/entry_points.txt"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("IRONACCEL_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
    env["IRONACCEL_REQUIRE"] = "mydev"  # a skip would be a failure: the kit must run for real
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(tests)],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    from ironaccel.testing.conformance import BackendConformance

    kit = [name for name in dir(BackendConformance) if name.startswith("test_")]
    assert done.returncode == 0 and f"{len(kit)} passed" in done.stdout, done.stdout[-4000:] + done.stderr[-2000:]
    assert "skipped" not in done.stdout


def _can_build_wheels() -> bool:
    """setuptools with a bdist_wheel command (its own from 70.1, else the `wheel` package's)."""
    if importlib.util.find_spec("setuptools") is None:
        return False
    try:
        return importlib.util.find_spec("setuptools.command.bdist_wheel") is not None or \
            importlib.util.find_spec("wheel") is not None
    except ImportError:
        return importlib.util.find_spec("wheel") is not None


def install(project: Path, site: Path) -> None:
    """Install `project` into the folder `site`: its pyproject.toml built by pip and setuptools (offline, with
    no build isolation: ironaccel-core is the one installed here), or, in a venv without setuptools (Python
    3.12's bare venvs, or one whose setuptools cannot build a wheel), the dist-info written from the same
    pyproject.toml's [project] table."""
    if _can_build_wheels():
        built = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                                "--no-index", "--target", str(site), str(project)], capture_output=True, text=True)
        assert built.returncode == 0, built.stdout + built.stderr
        return
    import tomllib

    meta = tomllib.loads((project / "pyproject.toml").read_text())["project"]
    shutil.copytree(project / "mydev_ironaccel", site / "mydev_ironaccel")
    info = site / f"{meta['name'].replace('-', '_')}-{meta['version']}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {meta['name']}\nVersion: {meta['version']}\n")
    groups = meta["entry-points"]
    (info / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{name} = {target}\n" for name, target in points.items())
        for group, points in groups.items()))
