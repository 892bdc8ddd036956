"""Packaging promises: the license and the JSON Schemas ship, the schemas can be listed,
a missing optional extra is named, and the sdist carries what its tests need.

The slow check (build the sdist and the wheel, install the wheel in a fresh venv
outside the checkout, run a subset of the sdist's own tests) is marked ``slow``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
import venv
import zipfile
from pathlib import Path

import pytest

import kernel
from kernel.effects.cli import main
from kernel.effects.schemas import DOCUMENTS, load_schema, schema_names
from kernel.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]


def test_every_generated_schema_is_listed_and_loads() -> None:
    """schema_names() lists exactly the generated documents; each loads as JSON Schema."""
    assert schema_names() == sorted(DOCUMENTS)
    for name in schema_names():
        assert load_schema(name)["$schema"].endswith("2020-12/schema")
    with pytest.raises(ConfigError, match="shipped: "):
        load_schema("../pyproject")


def test_kernel_schemas_list_and_show(capsys: pytest.CaptureFixture[str]) -> None:
    """`kernel schemas list` names every schema; `show` prints one; an unknown name is
    exit 2 with one line."""
    assert main(["schemas", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split("\t")[0] for line in lines] == sorted(DOCUMENTS)
    assert main(["schemas", "show", "run-record"]) == 0
    assert json.loads(capsys.readouterr().out)["title"]
    assert main(["schemas", "show", "nope"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_strategies_without_hypothesis_name_the_extra() -> None:
    """`import kernel.strategies` without hypothesis says which extra to install."""
    code = "import sys; sys.modules['hypothesis'] = None; import kernel.strategies"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 1
    assert "evidence-kernel[testing]" in proc.stderr
    assert "ModuleNotFoundError" in proc.stderr


def test_pyproject_declares_license_files_urls_and_classifiers() -> None:
    """The metadata a package index shows: license file, classifiers, package data."""
    text = (ROOT / "pyproject.toml").read_text()
    assert 'license-files = ["LICENSE"]' in text
    assert "Programming Language :: Python :: 3.13" in text
    assert "schemas/*.schema.json" in text
    assert (ROOT / "LICENSE").read_text().lstrip().startswith("Apache License")


def _build(tmp: Path) -> tuple[Path, Path]:
    out = tmp / "dist"
    subprocess.run(
        [sys.executable, "-m", "build", "--sdist", "--wheel", "--outdir", str(out), str(ROOT)],
        check=True,
        capture_output=True,
    )
    (sdist,) = out.glob("*.tar.gz")
    (wheel,) = out.glob("*.whl")
    return sdist, wheel


@pytest.mark.slow
def test_sdist_and_wheel_ship_what_they_promise(tmp_path: Path) -> None:
    """The wheel has LICENSE and every schema; the sdist has the tests, fixtures,
    conftest and docs; installed outside the checkout, the sdist's tests pass."""
    pytest.importorskip("build")
    sdist, wheel = _build(tmp_path)
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    # The type checkers' view of `import kernel`, and the version read from the code.
    assert {"kernel/__init__.pyi", "kernel/py.typed"} <= set(names)
    assert f"-{kernel.__version__}-" in Path(wheel).name
    for name in DOCUMENTS:
        assert f"kernel/schemas/{name}.schema.json" in names
    # The static screen's policy (kernel.effects.adapters.screen) ships as data.
    assert "kernel/policies/candidate-surface.toml" in names
    with tarfile.open(sdist) as archive:
        members = archive.getnames()
        archive.extractall(tmp_path / "src", filter="data")
    top = members[0].split("/")[0]
    for needed in ("LICENSE", "tests/conftest.py", "fixtures/demo/config.json", "docs/adr"):
        assert any(m.startswith(f"{top}/{needed}") for m in members), needed
    tests_in_tree = {p.name for p in (ROOT / "tests").glob("test_*.py")}
    assert tests_in_tree <= {Path(m).name for m in members}
    env = tmp_path / "venv"
    venv.create(env, with_pip=True)
    python = env / "bin" / "python"
    subprocess.run(
        [python, "-m", "pip", "install", "--quiet", f"{wheel}[testing]", "pytest", "jsonschema"],
        check=True,
        capture_output=True,
    )
    unpacked = tmp_path / "src" / top
    proc = subprocess.run(
        [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_identity.py",
         "tests/test_render.py", "tests/test_idkmesh.py"],
        cwd=unpacked, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:]
