"""Run-record and verification validators the main tests do not reach, each attacked
with the one value it exists to refuse."""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest

from kernel.errors import FieldError, RecordError
from kernel.importers.idkmesh import run_record_from_idkmesh
from kernel.run.record import (
    AttemptError,
    AttemptErrorCode,
    AttemptState,
    CheckRun,
    DeclaredReplay,
    ProvenanceInput,
    RunAuthority,
    RunProvenance,
    SandboxRun,
    attempt_shape_problem,
    evidence_isolation,
)
from kernel.run.verification import Isolation, SandboxLimit, WorkInput, WorkUnit

D = "d" * 64
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.mark.parametrize("value", ["other", "", 1, None])
def test_a_constant_field_names_the_expected_value(value: object) -> None:
    """Built directly (not parsed), a record's kind is still checked by its Literal
    annotation, and the error names the record, the field and the one value admitted."""
    document = json.loads((FIXTURES / "idkmesh/demo.run.json").read_text())
    record = run_record_from_idkmesh(document)
    with pytest.raises(
        FieldError,
        match=rf"RunRecord.kind: expected one of \['kernel-run-record'\], got {value!r}",
    ):
        attrs.evolve(record, kind=value)  # type: ignore[arg-type]
    assert attrs.evolve(record, kind="kernel-run-record") == record


@pytest.mark.parametrize("field", [f.name for f in attrs.fields(RunAuthority)])
@pytest.mark.parametrize("value", [True, 0, 1, None, "false"])
def test_an_authority_flag_is_exactly_false(field: str, value: object) -> None:
    """A run grants nothing: each authority flag admits ``False`` alone, not a falsy
    look-alike (0, None), when built and when read."""
    with pytest.raises(FieldError, match=rf"RunAuthority\.{field}: expected one of \[False\]"):
        attrs.evolve(RunAuthority.none(), **{field: value})  # type: ignore[arg-type]
    with pytest.raises(RecordError, match=rf"{field}: expected one of \[False\]"):
        RunAuthority.from_dict({**RunAuthority.none().to_dict(), field: value})
    assert RunAuthority.from_dict(RunAuthority.none().to_dict()) == RunAuthority.none()


@pytest.mark.parametrize("message", ["", "   ", 3])
def test_an_attempt_error_needs_a_message(message: object) -> None:
    with pytest.raises(
        FieldError, match=r"AttemptError.message: expected (a non-blank string|str)"
    ):
        AttemptError(code=AttemptErrorCode.WORKER_FAILED, message=message)  # type: ignore[arg-type]


def test_the_weakest_isolation_counts_the_worker_sandbox() -> None:
    overlay = SandboxRun(isolation=Isolation.OVERLAY, limits=())
    copy = SandboxRun(isolation=Isolation.COPY, limits=())
    checks = (CheckRun(check_id="c", sandbox=overlay, reason=None),)
    assert evidence_isolation(None, ()) is None
    assert evidence_isolation(None, checks) is Isolation.OVERLAY
    assert evidence_isolation(copy, checks) is Isolation.COPY
    assert evidence_isolation(overlay, ()) is Isolation.OVERLAY


@pytest.mark.parametrize(
    ("state", "manifest", "problem"),
    [
        (AttemptState.WORKER_ERROR, True, "a worker_error attempt has no manifest"),
        (AttemptState.VERIFICATION_ERROR, False, "a verification_error attempt has a manifest"),
        (AttemptState.WORKER_ERROR, False, None),
        (AttemptState.VERIFICATION_ERROR, True, None),
        (AttemptState.RESULT_MANIFEST_ERROR, False, None),
    ],
)
def test_error_attempts_carry_a_manifest_exactly_when_their_state_says(
    state: AttemptState, manifest: bool, problem: str | None
) -> None:
    assert attempt_shape_problem(state, manifest, False, "boom") == problem


@pytest.mark.parametrize("names", [("b", "a"), ("a", "a")])
def test_provenance_inputs_are_unique_and_ascending(names: tuple[str, ...]) -> None:
    inputs = tuple(ProvenanceInput(name=n, digest=D) for n in names)
    with pytest.raises(FieldError, match="input names must be unique and ascending"):
        RunProvenance(declared_replay=DeclaredReplay.DETERMINISTIC, inputs=inputs)


@pytest.mark.parametrize("tree", ["HEAD", "a" * 39, "A" * 40, 40])
def test_a_baseline_tree_is_a_git_object_id(tree: object) -> None:
    with pytest.raises(
        FieldError, match=r"expected (a git object id \(40 or 64 hex\)|str or None, got int 40)"
    ):
        RunProvenance(
            declared_replay=DeclaredReplay.DETERMINISTIC,
            inputs=(),
            baseline_git_tree=tree,  # type: ignore[arg-type]
        )
    for good in ("a" * 40, "b" * 64, None):
        assert (
            RunProvenance(
                declared_replay=DeclaredReplay.DETERMINISTIC, inputs=(), baseline_git_tree=good
            ).baseline_git_tree
            == good
        )


@pytest.mark.parametrize("value", [0, -1, True, "1"])
def test_a_sandbox_limit_value_is_positive_or_null(value: object) -> None:
    with pytest.raises(
        FieldError,
        match=r"SandboxLimit.value: expected (a positive integer or null|an integer .* or None)",
    ):
        SandboxLimit(kind="memory", value=value, mechanism="cgroup")  # type: ignore[arg-type]
    assert SandboxLimit(kind="memory", value=None, mechanism="cgroup").value is None


def test_work_unit_input_ids_are_unique() -> None:
    inputs = (WorkInput(id="x", digest=D), WorkInput(id="x", digest=D))
    with pytest.raises(FieldError, match=r"inputs\[1\]\.id: duplicate id 'x'"):
        WorkUnit(id="u", version=1, objective="o", inputs=inputs, required_validators=())


def test_an_attempt_without_sandboxes_has_no_weakest_isolation() -> None:
    document = json.loads((FIXTURES / "idkmesh/demo.run.json").read_text())
    attempt = run_record_from_idkmesh(document).attempts[0]
    assert attempt.worker_sandbox is None
    assert attempt.weakest_isolation is None
    sandboxed = attrs.evolve(
        attempt, worker_sandbox=SandboxRun(isolation=Isolation.NAMESPACE_COPY, limits=())
    )
    assert sandboxed.weakest_isolation is Isolation.NAMESPACE_COPY
