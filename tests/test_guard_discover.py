"""kernel.guard.discover: the walk against `os.walk` and the documented rules."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from kernel.guard.discover import _Ignore, _module_of, discover_modules, module_name, pure_path
from kernel.guard.policy import find_project_root, markdown_files

_DIRS = st.sampled_from(["a", "b", ".h", "__pycache__", "env", "p.x"])
_FILES = st.sampled_from(
    ["__init__.py", "m.py", ".py", "n.txt", "pyvenv.cfg", ".gitignore", "b", "p.x"]
)
_IGNORE_LINES = st.sampled_from(
    ["a/", "*.py", "!m.py", "/b", "env", "**/m.py", "b/m.py", "# c", "", "p.*"]
)
_EXCLUDES = st.sampled_from(["a", "b/m.py", "*.txt", "p.x", "env/"])

Found = tuple[list[tuple[str, str, bool]], list[str], list[str], dict[str, tuple[int, int, int]]]


def _reference(top: str, exclude: list[str]) -> Found:
    """What `discover_modules` documents, through `os.walk` (top down, links to folders
    listed but not followed, unreadable folders skipped) and `module_name`; the
    ``.gitignore`` files are read from ``top`` down (nothing above it is asked for)."""
    ignore = _Ignore(exclude)
    out: list[tuple[str, str, bool]] = []
    visited: list[str] = []
    excluded: list[str] = []
    seen: dict[str, tuple[int, int, int]] = {}
    walk = os.walk(top)
    for folder, dirs, files in walk:
        rel = os.path.relpath(folder, top)
        prefix = [] if rel == "." else rel.split(os.sep)
        st_ = os.stat(folder)
        seen[folder] = (st_.st_size, st_.st_mtime_ns, st_.st_ino)
        if prefix and "pyvenv.cfg" in files and os.path.isfile(os.path.join(folder, "pyvenv.cfg")):
            visited.append(folder)
            dirs[:] = []
            continue
        visited.append(folder)
        if ".gitignore" in files:
            visited.append(os.path.join(folder, ".gitignore"))
            ignore.read(folder)
        keep = []
        for d in sorted(dirs):
            if d == "__pycache__" or d.startswith("."):
                continue
            path = os.path.join(folder, d)
            if ignore.ignored(path, "/".join([*prefix, d]), is_dir=True):
                if os.path.isfile(os.path.join(path, "pyvenv.cfg")):
                    visited.append(path)
                else:
                    excluded.append(".".join([*prefix, d]))
                continue
            keep.append(d)
        dirs[:] = keep
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            path = os.path.join(folder, name)
            module, is_package = module_name([*prefix, name])
            if ignore.ignored(path, "/".join([*prefix, name]), is_dir=False):
                excluded.append(module)
            elif module:
                out.append((path, module, is_package))
    return out, visited, excluded, seen


def _make(top: Path, entries: list[tuple[list[str], str, list[str]]], links: bool) -> None:
    for folders, name, lines in entries:
        here = top.joinpath(*folders)
        try:
            here.mkdir(parents=True, exist_ok=True)
            target = here / name
            if not target.exists():
                target.write_text("\n".join(lines) + "\n", encoding="utf-8")
        except (FileExistsError, NotADirectoryError):
            continue  # a name taken by a file and a folder at once: left as it is
    if links:
        (top / "ln").symlink_to(top / "a", target_is_directory=True)
        (top / "ln.py").symlink_to(top / "gone.py")


@settings(max_examples=150, deadline=None)
@given(
    entries=st.lists(
        st.tuples(st.lists(_DIRS, max_size=3), _FILES, st.lists(_IGNORE_LINES, max_size=3)),
        max_size=14,
    ),
    exclude=st.lists(_EXCLUDES, max_size=2),
    links=st.booleans(),
)
def test_the_walk_finds_what_os_walk_and_the_rules_find(
    entries: list[tuple[list[str], str, list[str]]], exclude: list[str], links: bool
) -> None:
    """For any tree (hidden folders, `__pycache__`, virtual environments, `.gitignore`
    rules with negation and anchors, `--exclude`, links to folders and dangling links):
    the modules, the folders and files recorded as visited, the names left out and the
    stats of the folders walked, in order, are those of a plain `os.walk` reading of
    the documented rules (the walk's shortcuts change none of them)."""
    with tempfile.TemporaryDirectory() as tmp:
        top = Path(tmp) / "root"
        top.mkdir()
        _make(top, entries, links)
        for start in (str(top), str(top) + os.sep):
            visited: list[str] = []
            excluded: list[str] = []
            seen: dict[str, tuple[int, int, int]] = {}
            found = discover_modules(
                start,
                exclude=exclude,
                gitignore_from=start,
                visited=visited,
                excluded=excluded,
                seen=seen,
            )
            want = _reference(start, exclude)
            # Above the top, the walk also records the `.gitignore` of each folder it
            # looked in (none here: the top is where the rules start).
            assert (found, visited, excluded, list(seen.items())) == (
                want[0],
                want[1],
                want[2],
                list(want[3].items()),
            )


@given(
    folders=st.lists(st.text("abc_.", min_size=1, max_size=4), max_size=3),
    name=st.sampled_from(["__init__.py", "x.py", ".py", "a.b.py", "__init__.pyi.py"]),
)
def test_a_module_is_named_as_module_name_names_it(folders: list[str], name: str) -> None:
    """The walk names a file from its folder's dotted name, built once per folder: the
    same name and package flag as `module_name` of the whole path."""
    assert _module_of(".".join(folders), name) == module_name([*folders, name])


def test_no_rule_and_no_pattern_ignore_nothing(tmp_path: Path) -> None:
    """With no `.gitignore` and no `--exclude`, nothing is matched (the walk skips the
    matching); one `.gitignore` met on the way turns matching on below it."""
    assert not _Ignore([]).active
    (tmp_path / ".gitignore").write_text("x\n", encoding="utf-8")
    ignore = _Ignore([])
    ignore.read(str(tmp_path))
    assert ignore.active
    assert _Ignore(["x"]).active


@given(st.lists(st.sampled_from(["/", ".", "..", "a", "b.c", " "]), max_size=12).map("".join))
def test_pure_path_writes_a_path_as_pathlib_does(raw: str) -> None:
    """Paths from the command line are shown as `pathlib` shows them (repeated and
    trailing separators and ``.`` parts dropped, ``..`` kept, two leading separators
    kept), though a cold run never imports `pathlib`."""
    assert pure_path(raw) == str(Path(raw))
    assert pure_path(Path(raw)) == str(Path(raw))


def test_markdown_files_and_the_project_root_are_pathlibs(tmp_path: Path) -> None:
    """`markdown_files` lists what ``sorted(Path(folder).glob("*.md"))`` does (hidden
    files and a folder named ``*.md`` too, nothing for a missing folder), and
    `find_project_root` answers ``Path.resolve`` of the folder, as a string."""
    adr = tmp_path / "proj" / "docs" / "adr"
    (adr / "x.md").mkdir(parents=True)
    for name in ["b.md", ".h.md", "a.md", "c.txt", ".md", "d.mdx"]:
        (adr / name).write_text("text\n", encoding="utf-8")
    want = [str(p) for p in sorted(adr.glob("*.md"))]
    assert markdown_files(str(adr)) == want
    assert markdown_files(str(adr / "missing")) == []
    (adr / "z.md").write_text("```guard\n[[rules]]\n```\n", encoding="utf-8")
    inner = tmp_path / "proj" / "src" / "pkg"
    inner.mkdir(parents=True)
    assert find_project_root(inner) == str((tmp_path / "proj").resolve())
    assert find_project_root(str(inner / "missing.py")) == str((tmp_path / "proj").resolve())
