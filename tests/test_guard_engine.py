"""kernel.guard's engine: the effect map kept between runs, parsing split over forked
processes (same report as one process, a failing child costs nothing), the split of
the work by size, and the warm replay of the console script."""

from __future__ import annotations

import ast
import gc
import os
import platform
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernel.effects.cli import main
from kernel.guard import Policy, Rule, check_tree, effects, engine, installed, pool, scan
from kernel.guard.names import ImportPass
from kernel.guard.patterns import CallMatcher
from kernel.guard.pool import PARALLEL_MIN_FILES, split_by_size
from test_guard import POLICY_MD, _age, _tree  # type: ignore[import-not-found]  # sibling test module

if TYPE_CHECKING:
    from tests.conftest import ScriptRun

LIB = """\
import time as _t
class Base:
    def now(self):
        return _t.time()
class Child(Base):
    pass
def helper():
    return _t.time()
"""

USER = "import {lib}\n{lib}.helper()\n{lib}.Child.now\n"


def _policy(**kw: object) -> Policy:
    fields: dict[str, object] = {"name": "r", "modules": ("pkg", "pkg.*")}
    fields.update(kw)
    return Policy(rules=(Rule(**fields),))  # type: ignore[arg-type]


def _installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> Path:
    """An installed module ``name`` (a fresh name per test: module lookups are
    memoised per process) whose functions read the clock."""
    lib = tmp_path / "site"
    lib.mkdir()
    path = lib / f"{name}.py"
    path.write_text(LIB, encoding="utf-8")
    old = 1_000_000_000
    os.utime(path, (old, old))  # older than the racy window of any cache writing
    monkeypatch.syspath_prepend(str(lib))
    return path


def _count_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    reads: list[str] = []
    real = effects._Reader.read

    def counted(self: effects._Reader) -> effects.Summary:
        reads.append(self.module)
        return real(self)

    monkeypatch.setattr(effects._Reader, "read", counted)
    return reads


def _forget_summaries(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process forgets the effect map, as a new `kernel guard` process starts."""
    monkeypatch.setattr(scan, "_EFFECT_MEMO", {})
    monkeypatch.setattr(effects, "_SUMMARIES", {})
    monkeypatch.setattr(effects, "_NEW", set())


def test_effect_map_is_kept_between_runs_and_follows_content(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new run reads no installed module the cache summarised; an edited one (another
    digest) is read again and its new behaviour is reported; a damaged cache is a cold
    run; every run reports the same."""
    lib = _installed(tmp_path, monkeypatch, "kg_effects_kept")
    src = _tree(tmp_path / "p", {"pkg/__init__.py": "", "pkg/a.py": USER.format(lib=lib.stem)})
    policy = _policy(forbid_calls=("time.*", "os.system"), effects=True)
    cache = tmp_path / "cache"
    reads = _count_reads(monkeypatch)
    _forget_summaries(monkeypatch)
    first = check_tree(src, policy, cache_dir=cache)
    assert reads == [lib.stem]
    assert [v.code.value for v in first.violations] == ["KG012", "KG012"]
    assert len(list(cache.glob("effects-*.marshal"))) == 1
    (src / "pkg" / "a.py").write_text(USER.format(lib=lib.stem) + "x = 1\n", encoding="utf-8")
    _forget_summaries(monkeypatch)
    second = check_tree(src, policy, cache_dir=cache)
    assert reads == [lib.stem]  # the installed module was not read again
    assert second.violations == first.violations
    lib.write_text(LIB.replace("_t.time()", "_t.sleep(0)", 1), encoding="utf-8")
    os.utime(lib, (1_000_000_000, 1_000_000_000))  # same mtime: the digest tells
    (src / "pkg" / "a.py").write_text(USER.format(lib=lib.stem), encoding="utf-8")
    _forget_summaries(monkeypatch)
    third = check_tree(src, policy, cache_dir=cache)
    assert reads == [lib.stem, lib.stem]
    assert [v.message.rsplit("-> ", 1)[1] for v in third.violations] == [
        "time.time",
        "time.sleep",
    ]
    for file in cache.glob("effects-*.marshal"):
        file.write_bytes(b"damaged")
    (src / "pkg" / "a.py").write_text(USER.format(lib=lib.stem) + "y = 2\n", encoding="utf-8")
    _forget_summaries(monkeypatch)
    assert check_tree(src, policy, cache_dir=cache).violations == third.violations
    assert reads == [lib.stem] * 3


def test_effect_summaries_of_the_racy_window_are_checked_by_digest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A summary whose file changed within the racy window of the cache's writing is
    not trusted by its stat; one of the wrong shape is dropped."""
    _forget_summaries(monkeypatch)
    summary: effects.Summary = ({}, {}, {})
    effects.import_summaries(
        {
            "/old.py": ((1, 10), "d1", "old", summary),
            "/new.py": ((1, 99), "d2", "new", summary),
            "/bad.py": ("not", "a", "summary"),
            7: ((1, 1), "d", "m", summary),
        },
        trusted_before_ns=50,
    )
    kept = effects._SUMMARIES
    assert kept == {
        "/old.py": ((1, 10), "d1", "old", summary),
        "/new.py": ((-1, -1), "d2", "new", summary),
    }
    assert effects.take_new() == {}


def _forget_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process forgets the installed modules' import tables, as a new process."""
    installed.module_imports.cache_clear()
    installed.through.cache_clear()
    monkeypatch.setattr(installed, "_TABLES", {})
    monkeypatch.setattr(installed, "_NEW_TABLES", set())


def test_import_tables_are_kept_between_runs_and_follow_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new run reads no installed module whose import table the cache holds (its
    reach-through is found all the same); an edited one is read again and its new
    bindings count; a damaged cache is a cold run."""
    lib = tmp_path / "site" / "kg_tables_kept.py"
    lib.parent.mkdir()
    lib.write_text("import os as _o  # kg-tables-marker\n", encoding="utf-8")
    os.utime(lib, (1_000_000_000, 1_000_000_000))
    monkeypatch.syspath_prepend(str(lib.parent))
    src = _tree(tmp_path / "p", {"pkg/__init__.py": "", "pkg/a.py": ""})
    policy = _policy(forbid_calls=("os.system",))
    cache = tmp_path / "cache"
    reads: list[int] = []
    real = installed._import_statements

    def counted(data: bytes) -> list[str]:
        reads.extend([1] if b"kg-tables-marker" in data else [])
        return real(data)

    monkeypatch.setattr(installed, "_import_statements", counted)

    def run(user: str) -> list[str]:
        (src / "pkg" / "a.py").write_text(user, encoding="utf-8")  # the file cache misses
        _forget_tables(monkeypatch)
        _forget_summaries(monkeypatch)
        return [v.code.value for v in check_tree(src, policy, cache_dir=cache).violations]

    assert run("import kg_tables_kept\nkg_tables_kept._o.system('x')\n") == ["KG004"]
    assert reads == [1]
    assert run("import kg_tables_kept\nkg_tables_kept._o.system('y')\n") == ["KG004"]
    assert reads == [1]  # the table came from the cache
    lib.write_text("import sys as _o  # kg-tables-marker\n", encoding="utf-8")
    os.utime(lib, (1_000_000_007, 1_000_000_007))
    assert run("import kg_tables_kept\nkg_tables_kept._o.system('x')\n") == []
    assert reads == [1, 1]
    for file in cache.glob("effects-*.marshal"):
        file.write_bytes(b"damaged")
    assert run("import kg_tables_kept\nkg_tables_kept._o.system('y')\n") == []
    assert reads == [1, 1, 1]


def test_import_tables_of_the_racy_window_or_the_wrong_shape_are_dropped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A table whose file changed within the racy window of the cache's writing is read
    again; one of the wrong shape is dropped; loaded tables are not new."""
    _forget_tables(monkeypatch)
    table = {"_o": ("os",)}
    installed.import_tables(
        {
            "/old.py": ((1, 10), "old", table),
            "/new.py": ((1, 99), "new", table),
            "/bad.py": ((1, 10), "bad", {"_o": "os"}),
            "/short.py": ((1, 10), "short"),
            7: ((1, 10), "m", table),
        },
        trusted_before_ns=50,
    )
    kept = installed._TABLES
    assert kept == {"/old.py": ((1, 10), "old", table)}
    assert installed.take_new_tables() == {}
    installed.import_tables(["not", "a", "dict"], trusted_before_ns=50)
    assert kept == {"/old.py": ((1, 10), "old", table)}


def _project(tmp_path: Path) -> tuple[Path, Policy]:
    files = {
        f"pkg/m{i}.py": f"import os\nx = {i}\n" + "y = 1\n" * (i % 7) + "os.system('x')\n"
        for i in range(PARALLEL_MIN_FILES + 6)
    }
    files["pkg/__init__.py"] = ""
    files["pkg/broken.py"] = "def (:\n"
    files["pkg/z.py"] = "import pkg.m1\n"
    src = _tree(tmp_path, files)
    policy = _policy(forbid_calls=("os.system",), forbid_imports=("subprocess",), transitive=True)
    return src, policy


def test_forked_parsing_gives_the_report_of_one_process(tmp_path: Path) -> None:
    """Two or three processes, cold or with a cache: the same report as one."""
    src, policy = _project(tmp_path)
    serial = check_tree(src, policy, jobs=1)
    assert len(serial.violations) == PARALLEL_MIN_FILES + 7
    for jobs in (2, 3):
        assert check_tree(src, policy, jobs=jobs) == serial
    cache = tmp_path / "cache"
    assert check_tree(src, policy, jobs=2, cache_dir=cache).violations == serial.violations


@pytest.mark.parametrize("jobs", [1, 2])
def test_imports_are_kept_only_when_a_rule_reads_the_import_graph(
    tmp_path: Path, jobs: int
) -> None:
    """Without a transitive or layers rule no file's imports are kept (none is cached,
    from one process or forked ones); a policy with one, over the same cache folder,
    still reaches through them: the report of an uncached run."""
    import marshal

    src, _policy_of_project = _project(tmp_path)
    plain = _policy(forbid_imports=("os",))
    graph = _policy(forbid_imports=("os",), transitive=True)  # pkg.z reaches os
    cache = tmp_path / "cache"
    assert check_tree(src, plain, jobs=jobs, cache_dir=cache) == check_tree(src, plain, jobs=1)
    (saved,) = [
        marshal.loads(f.read_bytes())
        for f in cache.glob("*.marshal")
        if not f.name.startswith(("effects-", "last-runs"))
    ]
    assert len(saved[2]) == PARALLEL_MIN_FILES + 9
    assert all(entry[4] == [] for entry in saved[2].values())
    reach = check_tree(src, graph, jobs=jobs, cache_dir=cache)
    assert any(v.code.value == "KG007" for v in reach.violations)
    assert reach == check_tree(src, graph, jobs=1)
    again = check_tree(src, graph, jobs=jobs, cache_dir=cache)
    assert again.violations == reach.violations


_CHILD_PROBE = """
import sys
from pathlib import Path
from kernel.guard import Policy, Rule, check_tree, pool

parsed_here = []
real = pool.scan_source

def counted(data, **kw):
    parsed_here.append(kw["filename"])
    return real(data, **kw)

pool.scan_source = counted
src = Path(sys.argv[1])
rule = Rule(name="r", modules=("pkg", "pkg.*"), forbid_calls=("os.system",), transitive=True)
policy = Policy(rules=(rule,))
forked = check_tree(src, policy, jobs=2)
print(len(parsed_here), forked == check_tree(src, policy, jobs=1))
"""


def test_a_child_s_results_are_taken_not_parsed_again(tmp_path: Path) -> None:
    """With two jobs this process parses only its own share: what the child sent back
    (its results, its summaries and import tables) is read, not thrown away. In a
    fresh interpreter: threads another test left running would rightly stop the fork."""
    src, _policy = _project(tmp_path)
    out = subprocess.run(
        [sys.executable, "-c", _CHILD_PROBE, str(src)],
        capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    parsed_here, same = out.stdout.split()
    assert 0 < int(parsed_here) < len(list(src.rglob("*.py")))
    assert same == "True"


def test_a_failing_child_costs_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A child that dies before sending its results: its share is parsed here."""
    src, policy = _project(tmp_path)
    serial = check_tree(src, policy, jobs=1)
    parent = os.getpid()
    real = pool._scan_one

    def dies_in_child(job: pool.Job, matcher: object, keep_imports: bool) -> pool.Done:
        if os.getpid() != parent:
            raise RuntimeError("the child fails")
        return real(job, matcher, keep_imports)  # type: ignore[arg-type]

    monkeypatch.setattr(pool, "_scan_one", dies_in_child)
    assert check_tree(src, policy, jobs=2) == serial


def test_no_fork_while_other_threads_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With another thread alive, forking could deadlock the child: parsed here."""
    src, policy = _project(tmp_path)
    serial = check_tree(src, policy, jobs=1)

    def no_fork() -> int:
        raise AssertionError("forked with a thread running")

    monkeypatch.setattr(os, "fork", no_fork)
    stop = threading.Event()
    waiter = threading.Thread(target=stop.wait)
    waiter.start()
    try:
        assert check_tree(src, policy, jobs=2) == serial
    finally:
        stop.set()
        waiter.join()


@given(st.lists(st.integers(0, 10_000), max_size=60), st.integers(1, 5))
def test_split_by_size_is_a_balanced_partition(sizes: list[int], shares: int) -> None:
    """For all sizes and share counts: every index in exactly one share, each share in
    index order, and no share heavier than the lightest by more than the largest file."""
    groups = split_by_size(sizes, shares)
    assert len(groups) == shares
    assert sorted(i for g in groups for i in g) == list(range(len(sizes)))
    assert all(g == sorted(g) for g in groups)
    totals = [sum(sizes[i] for i in g) for g in groups]
    assert max(totals) - min(totals) <= max(sizes, default=0)


@given(st.binary(max_size=300_000))
def test_a_file_is_read_whole_with_the_stat_of_what_was_opened(data: bytes) -> None:
    """For all contents (empty, one read, many): every byte, and the stat of that file."""
    import tempfile

    with tempfile.NamedTemporaryFile() as fh:
        fh.write(data)
        fh.flush()
        got, stat = pool._read(fh.name)
        assert got == data
        assert (stat.st_size, stat.st_ino) == (len(data), os.fstat(fh.fileno()).st_ino)


@given(
    top=st.sampled_from(["src", "./src", "src/", "src//", "a/../src", "/", "/tmp/x/"]),
    root=st.sampled_from([None, ".", "src", "a/b", "/", "/tmp"]),
    names=st.lists(
        st.lists(st.sampled_from(["p", "q.py", "...", ".h", "r r"]), min_size=1, max_size=3),
        max_size=5,
    ),
)
def test_a_walked_path_is_shown_as_its_relpath_from_the_root(
    top: str, root: str | None, names: list[list[str]]
) -> None:
    """For all tops, roots and paths the walk builds below a top (its path, one
    separator, listed names): the shown path is `os.path.relpath` of the file from the
    root, though no path is normalised one by one."""
    below = os.path.join(top, "")
    paths = [below + "/".join(parts) for parts in names]
    base = os.path.abspath(root if root is not None else os.curdir)
    want = {p: os.path.relpath(os.path.abspath(p), base) for p in paths}
    assert engine._displayed(top, paths, root) == want


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_file_that_cannot_be_read_is_a_finding_and_the_others_are_checked(
    tmp_path: Path, jobs: int
) -> None:
    """A module that is a dangling link: KG010 "cannot read" on it, the run goes on
    (one job reads it unchecked; more stat it first, for its size)."""
    src = _tree(tmp_path, {"app/__init__.py": "", "app/ok.py": "import subprocess\n"})
    (src / "app" / "gone.py").symlink_to(tmp_path / "missing.py")
    rule = Rule(name="r", modules=("app", "app.*"), forbid_imports=("subprocess",))
    policy = Policy(rules=(rule,))
    report = check_tree(src, policy, jobs=jobs)
    found = {(Path(v.path).name, v.code.value, v.message.split(":")[0]) for v in report.violations}
    assert ("gone.py", "KG010", "cannot read") in found
    assert any(name == "ok.py" and code == "KG001" for name, code, _m in found)


_FULLWIDTH_OPEN = "\uff4f\uff50\uff45\uff4e"  # NFKC-folds to `open`
_PIECES = ["open", "éopen", "opené", _FULLWIDTH_OPEN, "os", "pos", "x·open", "_open", "open2"]


@given(
    st.lists(
        st.tuples(
            st.sampled_from(_PIECES),
            st.sampled_from([" = ", "(", ".", " + ", "["]),
            st.sampled_from(_PIECES),
            st.sampled_from(["", "  # open", " ;x=1", "  # é"]),
        ),
        min_size=1,
        max_size=8,
    ),
    st.sampled_from(["open", "os"]),
)
def test_the_line_prefilter_finds_every_line_naming_the_identifier(
    lines: list[tuple[str, str, str, str]], name: str
) -> None:
    """For all lines of identifiers (ASCII and not, NFKC-equal ones, names that
    contain the name), the prefilter finds every line where the parser sees the
    identifier itself (the parser folds identifiers; `tokenize` does not know every
    identifier character: ``x·open`` is one name)."""
    import ast

    from kernel.guard.syntax import lines_of, prepare

    closers = {"(": ")", "[": "]"}
    text = "".join(f"{a}{op}{b}{closers.get(op, '')}{tail}\n" for a, op, b, tail in lines)
    _data, search, _source = prepare(text.encode("utf-8"))
    expected = {
        node.lineno
        for node in ast.walk(ast.parse(text))
        if (isinstance(node, ast.Name) and node.id == name)
        or (isinstance(node, ast.Attribute) and node.attr == name)
    }
    assert expected <= set(lines_of(search, [name]))


@pytest.mark.processes
def test_console_script_replay_loads_nothing_else(tmp_path: Path) -> None:
    """The console script's replay of an unchanged run imports the replay alone: no
    argparse, no command table, no scanner; the same output and exit code."""
    _tree(tmp_path, {"pkg/__init__.py": "", "pkg/a.py": "import os\nos.system('x')\n"})
    (tmp_path / "adr.md").write_text(POLICY_MD, encoding="utf-8")
    _age(tmp_path)
    cache = tmp_path.parent / f"{tmp_path.name}-cache"  # outside the aged tree
    probe = (
        "import sys\n"
        f"sys.argv = ['kernel', 'guard', '--config', 'adr.md', '--cache-dir', {str(cache)!r}]\n"
        "from kernel.effects.entry import main\ncode = main()\n"
        "print(code, 'argparse' in sys.modules, *sorted(m for m in sys.modules if "
        "m.startswith('kernel')))\n"
    )
    runs = []
    for _ in range(2):
        proc = subprocess.run(
            [sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, check=False
        )
        *output, last = proc.stdout.splitlines()
        runs.append((output, last.split()))
    (full_out, full), (replayed_out, replayed) = runs
    assert full_out == replayed_out
    assert full_out[-1].startswith("1 finding")
    assert full[:2] == ["1", "True"]
    assert "kernel.guard.scan" in full
    assert replayed == [
        "1",
        "False",
        "kernel",
        "kernel.effects",
        "kernel.effects.entry",
        "kernel.guard",
        "kernel.guard.fastpath",
    ]


# Loaded by a cold run's imports only for what it never does: JSON (orjson and its
# datetime/uuid/dataclasses, json; the output formats and the baseline load json when
# asked for), canonical identities, hmac, and argparse's terminal-width helper (shutil,
# with bz2, lzma and zlib).
_NOT_ON_THE_COLD_PATH = (
    "orjson",
    "json",
    "hmac",
    "uuid",
    "dataclasses",
    "shutil",
    "bz2",
    "lzma",
    "kernel.records.identity",
    "kernel.guard.baseline",
)


@pytest.mark.processes
def test_a_cold_text_run_imports_nothing_it_does_not_use(tmp_path: Path) -> None:
    """A full `kernel guard` run (text output, no baseline, nothing cached) in a fresh
    interpreter imports none of `_NOT_ON_THE_COLD_PATH`: each was tens to thousands of
    microseconds of every cold run. The file digests come from `kernel.records.digest`."""
    _tree(tmp_path, {"pkg/__init__.py": "", "pkg/a.py": "import os\nos.system('x')\n"})
    (tmp_path / "adr.md").write_text(POLICY_MD, encoding="utf-8")
    cache = tmp_path.parent / f"{tmp_path.name}-cold-cache"
    probe = (
        "import sys\n"
        f"sys.argv = ['kernel', 'guard', '--config', 'adr.md', '--cache-dir', {str(cache)!r}]\n"
        "from kernel.effects.entry import main\ncode = main()\n"
        "print(code, *sorted(sys.modules))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    *output, last = proc.stdout.splitlines()
    code, *loaded = last.split()
    assert output[-1].startswith("1 finding"), proc.stderr
    assert code == "1"
    assert {"kernel.guard.scan", "kernel.records.digest", "argparse"} <= set(loaded)
    assert [name for name in _NOT_ON_THE_COLD_PATH if name in loaded] == []


@pytest.mark.processes
def test_console_script_leaves_a_replayed_run_at_once(tmp_path: Path) -> None:
    """The console script's replay prints the recorded output, flushed, and exits with
    its code without the interpreter's shutdown (an exit handler does not run); so does
    a full run, once its output is flushed."""
    _tree(tmp_path, {"pkg/__init__.py": "", "pkg/a.py": "import os\nos.system('x')\n"})
    (tmp_path / "adr.md").write_text(POLICY_MD, encoding="utf-8")
    _age(tmp_path)
    cache = tmp_path.parent / f"{tmp_path.name}-exit-cache"  # outside the aged tree
    probe = (
        "import atexit, sys\n"
        f"sys.argv = ['kernel', 'guard', '--config', 'adr.md', '--cache-dir', {str(cache)!r}]\n"
        "atexit.register(lambda: print('shut down'))\n"
        "from kernel.effects.entry import script\nsys.exit(script())\n"
    )
    runs = [
        subprocess.run(
            [sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, check=False
        )
        for _ in range(2)
    ]
    full, replayed = runs
    assert full.returncode == replayed.returncode == 1
    assert replayed.stdout == full.stdout
    assert replayed.stdout.splitlines()[-1].startswith("1 finding")
    assert "shut down" not in full.stdout


@pytest.mark.processes
def test_console_script_runs_a_full_check_without_cyclic_collection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script_collections: ScriptRun
) -> None:
    """The console script's full `kernel guard` run, whose process ends with it, runs no
    cyclic collection once it has decided to run (a probe hooked on the collector counts
    them); `kernel.effects.cli.main` called in a process that goes on leaves the
    collector as it found it."""
    _tree(tmp_path, {"pkg/__init__.py": "", "pkg/a.py": "import os\nos.system('x')\n"})
    (tmp_path / "adr.md").write_text(POLICY_MD, encoding="utf-8")
    words = ["guard", "--config", "adr.md", "--no-cache"]
    proc, collections = script_collections(words, "kernel.effects.cli")
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.splitlines()[-1].startswith("1 finding")
    assert collections == 0
    assert gc.isenabled()
    monkeypatch.chdir(tmp_path)
    assert main(words) == 1
    assert gc.isenabled()


_HEAP_PROBE = """
import resource, sys
sys.path.insert(0, sys.argv.pop(1))
from kernel.effects.entry import _keep_freed_heap

if sys.argv[1:] == ["keep"]:
    _keep_freed_heap()
slots = [None] * 20  # no list grows (and stays) among the blocks
start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(30):  # as a check's files: 1.25 MB of blocks written, then all freed
    for i in range(20):
        slots[i] = bytearray(65536)  # below the first mmap threshold: from the heap
    for i in range(20):
        slots[i] = None
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - start)
"""


@pytest.mark.processes
@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's malloc thresholds")
def test_a_guard_runs_heap_keeps_what_it_freed_for_the_next_file() -> None:
    """Memory freed between two files is not handed back to the system to be faulted
    in again (page by page) for the next: after `_keep_freed_heap`, 30 rounds of 1.25 MB
    written and freed cost about one round's page faults, not thirty. glibc takes a
    threshold set by a variable as fixed (no dynamic threshold then): Dask's nanny sets
    ``MALLOC_TRIM_THRESHOLD_`` in the process that starts a cluster (this test run's),
    so the probe runs without those variables."""
    import kernel

    source = str(Path(kernel.__file__).parent.parent)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MALLOC_", "GLIBC_"))}

    def faults(*words: str) -> int:
        argv = [sys.executable, "-S", "-c", _HEAP_PROBE, source, *words]
        return int(subprocess.run(argv, capture_output=True, text=True, check=True, env=env).stdout)

    plain, kept = faults(), faults("keep")
    assert plain > 2000  # the heap was trimmed and grown again, round after round
    assert kept * 4 < plain


def test_replay_stops_when_a_skipped_virtual_environment_stops_being_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A folder holding `pyvenv.cfg` is not scanned; once the file is gone its modules
    are, so a recorded run is not replayed (the folder's mtime is recorded)."""
    files = {"pkg/__init__.py": "", "pkg/a.py": "x = 1\n"}
    files["pkg/env/pyvenv.cfg"] = "home = /usr\n"
    files["pkg/env/b.py"] = "import os\nos.system('x')\n"
    src = _tree(tmp_path, files)
    (tmp_path / "adr.md").write_text(POLICY_MD, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    args = ["guard", "--config", "adr.md", "--cache-dir", str(tmp_path.parent / "venv-cache")]
    _age(tmp_path)
    assert main(args) == 0
    assert main(args) == 0  # replayed
    (src / "pkg" / "env" / "pyvenv.cfg").unlink()
    _age(tmp_path)  # the old mtimes again: only the folder's listing changed
    os.utime(src / "pkg" / "env", (1_000_000_100, 1_000_000_100))
    assert main(args) == 1
    assert "pkg/env/b.py" in capsys.readouterr().out


@pytest.mark.processes
def test_replay_split_over_a_child_sees_a_change_in_either_half(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long record is checked half here, half in a forked child: a file changed in
    either half (same mtime, another size) or one created stops the replay."""
    from kernel.guard import fastpath

    tree = tmp_path / "tree"
    files = [tree / f"m{i}.py" for i in range(fastpath._SPLIT_MIN + 8)]
    _tree(tree, {f.name: "x = 1\n" for f in files})
    missing = tree / "later.py"
    cache = str(tmp_path / "cache")
    forks: list[int] = []
    real_fork = os.fork

    def counted_fork() -> int:
        forks.append(1)
        return real_fork()

    monkeypatch.setattr(os, "fork", counted_fork)
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1})
    monkeypatch.setattr(fastpath, "threads_running", lambda: False)
    paths = [str(f) for f in files] + [str(missing)]
    for victim in (files[1], files[-2], missing):
        _age(tree)
        fastpath.record(cache, ("k",), paths, "out\n", 1)
        assert fastpath.replay(cache, ("k",)) == ("out\n", 1)
        victim.write_text("x = 22\n", encoding="utf-8")
        _age(tree)  # the old mtime again: only the size (or existence) tells
        assert fastpath.replay(cache, ("k",)) is None
        if victim != missing:
            victim.write_text("x = 1\n", encoding="utf-8")
    assert len(forks) == 6


@pytest.mark.processes
def test_replay_of_a_long_record_stays_in_process_with_a_thread_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With another thread alive (forking could deadlock the child) or one core, the
    whole record is checked here."""
    from kernel.guard import fastpath

    tree = tmp_path / "tree"
    _tree(tree, {f"m{i}.py": "" for i in range(fastpath._SPLIT_MIN)})
    _age(tree)
    cache = str(tmp_path / "cache")
    fastpath.record(cache, ("k",), [str(p) for p in sorted(tree.iterdir())], "", 0)

    def no_fork() -> int:
        raise AssertionError("forked")

    monkeypatch.setattr(os, "fork", no_fork)
    stop = threading.Event()
    waiter = threading.Thread(target=stop.wait)
    waiter.start()
    try:
        assert fastpath.replay(cache, ("k",)) == ("", 0)
    finally:
        stop.set()
        waiter.join()
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0})
    assert fastpath.replay(cache, ("k",)) == ("", 0)


@pytest.mark.parametrize(
    "entry",
    [b"not marshal", 5, None, (1, [], "", 0)],
    ids=["garbage", "int", "none", "undecoded-tuple"],
)
def test_a_damaged_recorded_run_means_a_full_run(tmp_path: Path, entry: object) -> None:
    """A record whose entry is not one marshalled run is not replayed (and not an
    error)."""
    import marshal

    from kernel.guard import fastpath

    cache = tmp_path / "cache"
    cache.mkdir()
    blob = marshal.dumps((fastpath._MAGIC, {("k",): entry}))
    (cache / fastpath.RECORD_NAME).write_bytes(blob)
    assert fastpath.replay(str(cache), ("k",)) is None


def test_replay_holds_when_folders_gain_files_not_when_the_root_moves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A log written where one stands does not stop the replay; a `.git` created above
    does: the project root moves there, and with it the default import root (no
    module is covered from there: exit 2, where a replay would have said 0)."""
    from kernel.guard import engine

    here = tmp_path / "a" / "b"
    _tree(here, {"pkg/__init__.py": "", "pkg/a.py": "x = 1\n"})
    (tmp_path / "adr.md").write_text(POLICY_MD, encoding="utf-8")
    monkeypatch.chdir(here)
    args = ["guard", "--config", str(tmp_path / "adr.md"), "--cache-dir", str(tmp_path / "c")]
    _age(tmp_path)
    assert main(args) == 0
    real = engine.check_tree
    calls: list[int] = []

    def counted(*a: object, **kw: object) -> object:
        calls.append(1)
        return real(*a, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(engine, "check_tree", counted)
    (here / "run.log").write_text("noise\n", encoding="utf-8")
    assert main(args) == 0
    assert calls == []
    (tmp_path / "a" / ".git").mkdir()
    assert main(args) == 2
    assert calls == [1]
    capsys.readouterr()


def _after_the_first_check(monkeypatch: pytest.MonkeyPatch, change: Callable[[], None]) -> None:
    """Run ``change`` once, right after the first check of the tree returns: while the
    run that read the tree goes on, before it records."""
    from kernel.guard import engine

    real = engine.check_tree
    done: list[int] = []

    def then_changed(*a: object, **kw: object) -> object:
        report = real(*a, **kw)  # type: ignore[arg-type]
        if not done:
            done.append(1)
            change()
        return report

    monkeypatch.setattr(engine, "check_tree", then_changed)


@pytest.mark.parametrize("change", ["module edited", "module added"])
def test_a_change_made_after_the_run_read_it_is_never_replayed(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    change: str,
) -> None:
    """A module edited after the run parsed it, or one added to a folder after the run
    listed it, dated before the racy window (as in a long run): the next run is a full
    one that sees the change, never the recorded output of what was read before."""
    _tree(tmp_path, {"pkg/__init__.py": "", "pkg/a.py": "x = 1\n"})
    (tmp_path / "adr.md").write_text(POLICY_MD, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    args = ["guard", "--config", "adr.md", "--cache-dir", str(tmp_path / "c")]
    _age(tmp_path)

    def edit() -> None:
        pkg = tmp_path / "src" / "pkg"
        target = pkg / ("a.py" if change == "module edited" else "b.py")
        target.write_text("import subprocess\n", encoding="utf-8")
        for path in (target, pkg):
            os.utime(path, (1_000_000_100, 1_000_000_100))

    _after_the_first_check(monkeypatch, edit)
    assert main(args) == 0
    assert main(args) == 1
    assert "KG001" in capsys.readouterr().out


@pytest.mark.parametrize("change", ["policy edited", "gitignore edited"])
def test_a_file_edited_while_a_long_run_went_on_is_never_replayed(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    change: str,
) -> None:
    """A policy file or a ``.gitignore`` (stat-checked when the run records, not when it
    read them) edited while the run went on, which then ran 10 s more: the edit is
    dated inside the racy window of the run's start, so the next run is a full one
    that sees it, never the output recorded from what was read before."""
    from types import SimpleNamespace

    from kernel.guard import fastpath

    _tree(tmp_path, {"pkg/__init__.py": "", "pkg/a.py": "import subprocess\n"})
    (tmp_path / "adr.md").write_text(POLICY_MD, encoding="utf-8")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".gitignore").write_text("src/pkg/b.py\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    args = ["guard", "--config", "adr.md", "--cache-dir", str(tmp_path / "c")]
    _age(tmp_path)
    later = [0]
    clock = SimpleNamespace(time_ns=lambda: time.time_ns() + later[0])
    monkeypatch.setattr(fastpath, "time", clock)

    def edit() -> None:
        later[0] = 10_000_000_000  # the run goes on for 10 s more
        if change == "policy edited":
            text = POLICY_MD.replace('"subprocess"', '"socket"')
            (tmp_path / "adr.md").write_text(text, encoding="utf-8")
        else:
            (tmp_path / ".gitignore").write_text("src/pkg/a.py\n", encoding="utf-8")

    _after_the_first_check(monkeypatch, edit)
    assert main(args) == 1
    capsys.readouterr()
    assert main(args) == 0
    assert "KG001" not in capsys.readouterr().out


def test_old_effect_maps_are_pruned_other_files_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each tool version writes its own effect map: the two most recent are kept; the
    recorded runs and the per-file caches are not touched by that pruning."""
    lib = _installed(tmp_path, monkeypatch, "kg_effects_pruned")
    src = _tree(tmp_path / "p", {"pkg/__init__.py": "", "pkg/a.py": USER.format(lib=lib.stem)})
    cache = tmp_path / "cache"
    cache.mkdir()
    for i, name in enumerate(["effects-old1", "effects-old2", "effects-old3", "last-runs"]):
        (cache / f"{name}.marshal").write_bytes(b"x")
        os.utime(cache / f"{name}.marshal", (1_000_000_000 + i, 1_000_000_000 + i))
    _forget_summaries(monkeypatch)
    check_tree(src, _policy(forbid_calls=("time.*",), effects=True), cache_dir=cache)
    names = sorted(p.name for p in cache.glob("*.marshal"))
    assert [n for n in names if n.startswith("effects-old")] == ["effects-old3.marshal"]
    assert len([n for n in names if n.startswith("effects-")]) == 2
    assert "last-runs.marshal" in names
    assert len(names) == 4  # and the per-file cache of this policy


def test_console_script_leaves_a_full_guard_run_at_once_and_returns_any_other_verb(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """In process: a full `kernel guard` run flushes its output and leaves through
    `os._exit` with its code (the interpreter's shutdown would only free what the run
    built); another verb's code is returned to the caller as before."""
    from kernel.effects import entry

    _tree(tmp_path, {"pkg/__init__.py": "", "pkg/a.py": "import os\nos.system('x')\n"})
    (tmp_path / "adr.md").write_text(POLICY_MD, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    left: list[int] = []

    class _Left(Exception):
        pass

    def _exit(code: int) -> None:
        left.append(code)
        raise _Left

    monkeypatch.setattr(os, "_exit", _exit)
    kept: list[str] = []
    monkeypatch.setattr(entry, "_keep_freed_heap", lambda: kept.append(sys.argv[1]))
    monkeypatch.setattr(sys, "argv", ["kernel", "guard", "--config", "adr.md", "--no-cache"])
    with pytest.raises(_Left):
        entry.script()
    assert left == [1]
    assert kept == ["guard"]  # the heap kept for the check's files, before it starts
    assert capsys.readouterr().out.splitlines()[-1].startswith("1 finding")
    missing = str(tmp_path / "no-ledger.jsonl")
    monkeypatch.setattr(sys, "argv", ["kernel", "ledger", "verify", "--ledger", missing])
    assert entry.script() == 2
    assert left == [1]
    assert kept == ["guard"]
    assert "ledger not found" in capsys.readouterr().err


def test_the_kept_heap_block_moves_glibcs_dynamic_thresholds() -> None:
    """Freeing a block moves glibc's mmap threshold only when the block is above the
    default (128 kB) and at most the dynamic maximum (32 MB on 64 bits, mallopt(3)); the
    trim threshold becomes twice it. What that saves is measured by bench/guard.py
    (page faults are the system's count, not a test's)."""
    from kernel.effects import entry

    assert 128 << 10 < entry._HEAP_BLOCK <= 32 << 20


_STATEMENTS = st.sampled_from(
    [
        "x = 1\n",
        "\n",
        "# a comment\n",
        "if x:\n    y = 2\n\n    z = 3\n",
        "@d\ndef f():\n    pass\n",
        "@d\n\n@e(1,\n  2)\nclass C:\n    z = 3\n",
        "import os\n",
        's = """a\nb"""\n',
    ]
)


@given(st.lists(_STATEMENTS, max_size=12), st.sets(st.integers(1, 60), max_size=8))
def test_hits_are_the_statements_that_span_a_marked_line(
    parts: list[str], marked: set[int]
) -> None:
    """For all bodies and marked lines: the scan's walk picks exactly the statements
    whose lines (decorators included) hold a marked line, though it stops looking
    past the last one and steps over statements before the next."""
    src = "".join(parts)
    tree = ast.parse(src)
    scanner = ImportPass(
        data=src.encode(),
        search=src.encode(),
        tree=tree,
        module="m",
        is_package=False,
        rules=(),
        matcher=CallMatcher(()),
    )
    lines = sorted(marked)

    def spans(stmt: ast.stmt) -> bool:
        first = min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", []))])
        return any(first <= line <= (stmt.end_lineno or stmt.lineno) for line in lines)

    expected = [i for i, stmt in enumerate(tree.body) if spans(stmt)]
    assert scanner._hits(tree.body, lines) == expected
    scanner.lines = lines
    assert scanner._hits(tree.body) == expected
