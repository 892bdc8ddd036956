"""The ledger's PostgreSQL store against a real server.

CI (`.ci/run`) starts a server and exports ``KERNEL_TEST_POSTGRES_URL``. Locally, when
that is unset, a throwaway server is started here with ``initdb``/``pg_ctl`` in a
temporary folder (as an unprivileged user when run as root). Under CI a missing server
is a failure, never a skip.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import quote

import attrs
import psycopg
import pytest

from kernel.decide.ledger import EntryKind, LedgerReason, LedgerRefusal, LedgerVerified
from kernel.decide.merkle import (
    ProofChecked,
    ProofRefusal,
    TreeBuilder,
    TreeHead,
    check_consistency,
    check_inclusion,
    frontier_of,
)
from kernel.effects.cli import main
from kernel.effects.ledger_store import (
    LedgerStore,
    PostgresStore,
    export_jsonl,
    opened,
    prove_consistency,
    prove_inclusion,
    tree_head,
    verify_store,
)
from kernel.errors import EffectError

WRITER = """
import sys
from kernel.effects.ledger_store import open_store
from kernel.decide.ledger import EntryKind
store = open_store(sys.argv[1])
for i in range(int(sys.argv[3])):
    store.append(EntryKind.ADMISSION, {"writer": int(sys.argv[2]), "i": i})
store.close()
"""


def _binary(name: str) -> str | None:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else shutil.which(name)


def _demote(user: str) -> Callable[[], None]:
    entry = pwd.getpwnam(user)

    def run() -> None:
        os.setgid(entry.pw_gid)
        os.setuid(entry.pw_uid)

    return run


def _unprivileged_user() -> str:
    for name in ("postgres", "kernel-pg"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "kernel-pg"],
        check=True,
    )
    return "kernel-pg"


@pytest.fixture(scope="session")
def server_url() -> Iterator[str]:
    """A PostgreSQL server: CI's, or a throwaway one started for this session."""
    url = os.environ.get("KERNEL_TEST_POSTGRES_URL")
    if url:
        yield url
        return
    initdb, pg_ctl = _binary("initdb"), _binary("pg_ctl")
    if initdb is None or pg_ctl is None:
        if os.environ.get("CI"):
            pytest.fail("CI: no PostgreSQL server (KERNEL_TEST_POSTGRES_URL unset, no initdb)")
        pytest.skip("no PostgreSQL binaries here; CI runs these tests against a real server")
    folder = Path(tempfile.mkdtemp(prefix="kernel-pg-"))
    demote = None
    if os.geteuid() == 0:
        user = _unprivileged_user()
        shutil.chown(folder, user=user)
        demote = _demote(user)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    data = folder / "data"
    subprocess.run(
        [initdb, "-D", str(data), "-U", "kernel", "--auth=trust", "-E", "UTF8"],
        check=True, capture_output=True, preexec_fn=demote, cwd=folder,
    )  # fmt: skip
    options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off"
    subprocess.run(
        [pg_ctl, "-D", str(data), "-l", str(folder / "log"), "-o", options, "-w", "start"],
        check=True, capture_output=True, preexec_fn=demote, cwd=folder,
    )  # fmt: skip
    try:
        yield f"postgresql://kernel@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(
            [pg_ctl, "-D", str(data), "-m", "immediate", "stop"],
            capture_output=True, preexec_fn=demote, cwd=folder, check=False,
        )  # fmt: skip
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def ledger_url(server_url: str) -> Iterator[str]:
    """A URL whose search_path is a fresh schema: one empty ledger per test."""
    schema = "t_" + uuid.uuid4().hex[:12]
    with psycopg.connect(server_url, autocommit=True) as db:
        db.execute(f"CREATE SCHEMA {schema}")
    separator = "&" if "?" in server_url else "?"
    yield f"{server_url}{separator}options={quote(f'-csearch_path={schema}')}"
    with psycopg.connect(server_url, autocommit=True) as db:
        db.execute(f"DROP SCHEMA {schema} CASCADE")


def tamper(url: str, statement: str) -> None:
    """Edit the tables directly, as a database user with write access could."""
    with psycopg.connect(url, autocommit=True) as db:
        db.execute(statement)


def test_append_verify_and_tamper(ledger_url: str) -> None:
    """The same chain as SQLite; an edit in the middle is caught at that entry."""
    with opened(ledger_url) as store:
        assert isinstance(store, PostgresStore)
        for i in range(5):
            store.append(EntryKind.DECISION, {"i": i})
        outcome = verify_store(store)
        assert isinstance(outcome, LedgerVerified)
        assert outcome.count == 5
    tamper(ledger_url, "UPDATE kernel_ledger SET payload = '{}' WHERE seq = 3")
    with opened(ledger_url, create=False) as store:
        broken = verify_store(store)
    assert isinstance(broken, LedgerRefusal)
    assert broken.position == 3
    assert broken.reason_codes == (LedgerReason.PAYLOAD_EDITED,)


def test_deleting_the_last_entry_is_caught_and_blocks_appends(ledger_url: str) -> None:
    """The recorded head catches a removed last entry; appending onto it is refused."""
    with opened(ledger_url) as store:
        for i in range(3):
            store.append(EntryKind.STAGING, {"i": i})
    tamper(ledger_url, "DELETE FROM kernel_ledger WHERE seq = 3")
    with opened(ledger_url) as store:
        outcome = verify_store(store)
        assert isinstance(outcome, LedgerRefusal)
        assert outcome.reason_codes == (LedgerReason.HEAD_MISMATCH,)
        with pytest.raises(Exception, match="head does not match"):
            store.append(EntryKind.REFUSAL, {"x": 1})


def test_concurrent_processes_serialise(ledger_url: str) -> None:
    """4 processes x 250 appends: one intact chain of 1,000, nothing lost."""
    with opened(ledger_url):
        pass
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, ledger_url, str(w), "250"])
        for w in range(4)
    ]
    assert [w.wait(timeout=600) for w in writers] == [0] * 4
    with opened(ledger_url, create=False) as store:
        outcome = verify_store(store)
        assert isinstance(outcome, LedgerVerified)
        assert outcome.count == 1000
        assert len({e.payload for e in store.entries()}) == 1000


def test_cli_and_export(
    ledger_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`kernel ledger verify|export` take a postgresql:// URL; the export verifies alone
    and the password never appears in output."""
    with opened(ledger_url) as store:
        store.append(EntryKind.ADMISSION, {"a": 1})
        export_jsonl(store, tmp_path / "e.jsonl")
    assert main(["ledger", "verify", "--ledger", ledger_url]) == 0
    assert main(["ledger", "verify", "--jsonl", str(tmp_path / "e.jsonl")]) == 0
    tamper(ledger_url, "UPDATE kernel_ledger SET kind = 'promotion'")
    assert main(["ledger", "verify", "--ledger", ledger_url]) == 1
    capsys.readouterr()
    secret = ledger_url.replace("postgresql://kernel@", "postgresql://kernel:hunter2@")
    assert main(["ledger", "verify", "--ledger", secret]) == 1
    assert "hunter2" not in capsys.readouterr().out


def test_unreachable_server_is_unusable(capsys: pytest.CaptureFixture[str]) -> None:
    """A server that does not answer: exit 2, one line."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"postgresql://kernel:secret@127.0.0.1:{port}/postgres?connect_timeout=2"
    assert main(["ledger", "verify", "--ledger", url]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "secret" not in err


def _same_entries(url: str, path: Path, count: int) -> None:
    """The same payloads appended to a PostgreSQL and a SQLite ledger."""
    with opened(url) as pg, opened(path) as lite:
        for i in range(count):
            for store in (pg, lite):
                store.append(EntryKind.DECISION, {"i": i, "text": "é" * (i % 3)})


def test_proofs_from_postgres_are_the_sqlite_store_s_and_check(
    ledger_url: str, tmp_path: Path
) -> None:
    """Issue 22 item 4: the PostgreSQL store keeps the subtree roots as SQLite does; its
    tree heads and its inclusion and consistency proofs are exactly SQLite's for the
    same entries, and each checks with the RFC 9162 algorithms."""
    path = tmp_path / "l.sqlite"
    _same_entries(ledger_url, path, 37)
    with opened(ledger_url, create=False) as pg, opened(path, create=False) as lite:
        head = tree_head(pg)
        assert head == tree_head(lite)
        intact = verify_store(pg, anchors={})
        assert isinstance(intact, LedgerVerified)
        assert intact.root_hash == head.root_hash
        for seq in (1, 2, 16, 17, 32, 37):
            inclusion = prove_inclusion(pg, seq)
            assert inclusion == prove_inclusion(lite, seq)
            assert isinstance(check_inclusion(inclusion, head), ProofChecked)
        for old in (0, 1, 5, 16, 31, 36, 37):
            consistency = prove_consistency(pg, old)
            assert consistency == prove_consistency(lite, old)
            old_head = tree_head_at(lite, old)
            assert isinstance(check_consistency(consistency, old_head, head), ProofChecked)
        # A proof made for one entry does not check for another.
        wrong = attrs.evolve(prove_inclusion(pg, 5), entry_id=str(pg.entry_at(6)))
        assert isinstance(check_inclusion(wrong, head), ProofRefusal)


def tree_head_at(store: LedgerStore, size: int) -> TreeHead:
    """The head of the tree of the first ``size`` entries (from the stored roots)."""
    tree = TreeBuilder(size, [store.perfect(*part) for part in frontier_of(size)])
    return TreeHead(tree_size=size, root_hash=tree.root().hex())


def test_a_postgres_ledger_written_before_the_roots_still_proves(
    ledger_url: str, tmp_path: Path
) -> None:
    """Rows without kept roots (a ledger from before the column) are computed from the
    leaves, with the same results; appends after it keep roots again."""
    path = tmp_path / "l.sqlite"
    _same_entries(ledger_url, path, 11)
    tamper(ledger_url, "UPDATE kernel_ledger SET nodes = NULL")
    _same_entries(ledger_url, path, 6)
    with opened(ledger_url, create=False) as pg, opened(path, create=False) as lite:
        assert tree_head(pg) == tree_head(lite)
        assert prove_inclusion(pg, 3) == prove_inclusion(lite, 3)
        assert prove_consistency(pg, 7) == prove_consistency(lite, 7)


def test_a_tampered_postgres_row_is_an_error_not_a_proof(ledger_url: str) -> None:
    """A proof needs the rows it reads to be there and well formed."""
    with opened(ledger_url) as store:
        for i in range(4):
            store.append(EntryKind.STAGING, {"i": i})
    tamper(ledger_url, "UPDATE kernel_ledger SET entry_id = 'x', nodes = NULL WHERE seq = 2")
    with opened(ledger_url, create=False) as store, pytest.raises(EffectError, match="entry 2"):
        prove_inclusion(store, 3)


def test_the_ledger_cli_proves_from_postgres(
    ledger_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`kernel ledger head|prove|check-proof` with a postgresql:// ledger."""
    with opened(ledger_url) as store:
        for i in range(9):
            store.append(EntryKind.ADMISSION, {"i": i})
    capsys.readouterr()
    assert main(["ledger", "head", "--ledger", ledger_url]) == 0
    (tmp_path / "head.json").write_text(capsys.readouterr().out)
    assert main(["ledger", "prove", "--ledger", ledger_url, "--inclusion", "4"]) == 0
    (tmp_path / "proof.json").write_text(capsys.readouterr().out)
    assert main(["ledger", "check-proof", "--proof", str(tmp_path / "proof.json"),
                 "--head", str(tmp_path / "head.json")]) == 0  # fmt: skip
