"""The sandbox run by an unprivileged user (CI is root: the test creates the user).

An unprivileged runner maps the command to its own uid through an unprivileged user
namespace; the maps are written by the helper from the parent namespace. This file
runs a runner as a fresh system user and attacks the same promises as root's tests.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = os.geteuid() == 0
USER = "kernelsbx"
SYSTEM_PYTHON = shutil.which("python3", path="/usr/bin:/bin")

pytestmark = pytest.mark.skipif(
    not ROOT or SYSTEM_PYTHON is None or shutil.which("useradd") is None,
    reason="creating a user needs root and useradd; the runner needs a system python3",
)


@pytest.fixture(scope="module")
def user() -> Iterator[pwd.struct_passwd]:
    """An unprivileged system user without a home (created once, removed after)."""
    created = False
    try:
        entry = pwd.getpwnam(USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", USER],
            check=True,
            capture_output=True,
        )
        created = True
        entry = pwd.getpwnam(USER)
    try:
        yield entry
    finally:
        scratch = Path(tempfile.gettempdir()) / f"kernel-sandboxes-{entry.pw_uid}"
        shutil.rmtree(scratch, ignore_errors=True)
        if created:
            subprocess.run(["userdel", USER], check=False, capture_output=True)


@pytest.fixture
def site_paths() -> Iterator[str]:
    """This checkout's kernel and its runtime dependencies, copied where the
    unprivileged user can read them (a checkout or venv may sit in a 0700 folder)."""
    import attr
    import attrs
    import orjson

    top = Path(tempfile.mkdtemp(prefix="kernel-unpriv-site-", dir="/tmp"))
    try:
        top.chmod(0o755)
        sources = [Path(__file__).resolve().parent.parent / "src" / "kernel"]
        sources += [Path(str(m.__file__)).resolve().parent for m in (attr, attrs, orjson)]
        for source in sources:
            shutil.copytree(source, top / source.name, ignore=shutil.ignore_patterns("*.pyc"))
        yield str(top)
    finally:
        shutil.rmtree(top, ignore_errors=True)


RUNNER = textwrap.dedent("""
    import json, sys, tempfile
    from pathlib import Path
    from kernel.consensus import CaptureMode, Isolation
    from kernel.effects.sandbox import SandboxSpec, read_output, run_sandboxed
    base = Path(tempfile.mkdtemp())
    (base / "tree").mkdir()
    (base / "tree" / "f.txt").write_text("v1\\n")
    spill = base / "spill"
    spill.mkdir()
    probe = (
        "import errno, os\\n"
        "print(open('/proc/self/uid_map').read().split())\\n"
        "v = open('/proc/sys/kernel/hostname').read()\\n"
        "try:\\n"
        "    open('/proc/sys/kernel/hostname', 'w').write(v)\\n"
        "    print('wrote')\\n"
        "except OSError as e:\\n"
        "    print(errno.errorcode[e.errno])\\n"
        "open('f.txt', 'a').write('v2\\\\n')\\n"
    )
    capture = run_sandboxed(
        SandboxSpec(command=(sys.executable, "-c", probe), baseline=str(base / "tree"),
                    capture=CaptureMode.PATCH, timeout_s=60),
        spill_dir=spill,
    )
    patch = read_output(capture).decode() if capture.output_path else ""
    print(json.dumps({
        "status": str(capture.status), "isolation": str(capture.isolation),
        "error": capture.error, "stdout": Path(capture.stdout_path).read_text(),
        "patch": patch, "baseline": (base / "tree" / "f.txt").read_text(),
    }))
""")


def test_unprivileged_runner_maps_the_command_to_itself(
    user: pwd.struct_passwd, tmp_path: Path, site_paths: str
) -> None:
    """Run by an unprivileged user, the command is that user outside (never root),
    cannot write kernel settings, and the baseline stays unchanged."""
    work = tmp_path / "work"
    work.mkdir()
    os.chown(work, user.pw_uid, user.pw_gid)
    result = subprocess.run(
        [str(SYSTEM_PYTHON), "-c", RUNNER],
        cwd=work,
        user=user.pw_uid,
        group=user.pw_gid,
        extra_groups=[],
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": site_paths, "TMPDIR": "/tmp"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    outcome = json.loads(result.stdout.strip().splitlines()[-1])
    assert outcome["status"] == "ok", outcome
    assert outcome["isolation"] == "overlay", outcome
    uid_map, proc_sys = outcome["stdout"].splitlines()
    assert uid_map == str(["1000", str(user.pw_uid), "1"])
    assert proc_sys in ("EACCES", "EROFS", "EPERM")
    assert "+v2" in outcome["patch"]
    assert outcome["baseline"] == "v1\n"
