"""Records altered after they were built (a field overwritten or deleted in place) are
named, never a foreign exception from deep inside (issue 11, "Bad input")."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kernel
from kernel.errors import ParameterTypeError
from kernel.importers.idkmesh import run_record_from_idkmesh
from kernel.records.codec import Record, malformed

ROOT = Path(__file__).resolve().parent.parent
RUN = run_record_from_idkmesh(json.loads((ROOT / "fixtures/idkmesh/demo.run.json").read_text()))
REPORT = kernel.unwrap(kernel.build_evidence_report(RUN))
CHAIN = json.loads((ROOT / "fixtures/binding/reference-chain.json").read_text())
GRUN = kernel.GeometricSearchRun.from_dict(CHAIN["geometric_search_run"])
RESULT = kernel.CandidateOperatorResult.from_dict(CHAIN["candidate_operator_result"])
BINDING = kernel.unwrap(
    kernel.bind_candidate_attempt_to_run(original_run=GRUN, candidate_operator_result=RESULT)
)
DECISION = kernel.unwrap(
    kernel.record_decision(
        REPORT,
        decision_id="d-1",
        decision="escalate",
        rationale="verifiers disagree",
        decider_id="alice",
        decided_at="2026-01-01T00:00:00Z",
    )
)


def _paths(record: Record, prefix: str = "") -> list[tuple[str, Record, str]]:
    """Every (path, holder, field) of a record tree."""
    found = []
    for field in attrs.fields(type(record)):  # type: ignore[arg-type]
        value = getattr(record, field.name)
        path = f"{prefix}.{field.name}" if prefix else field.name
        found.append((path, record, field.name))
        items = value if type(value) is tuple else (value,)
        for index, item in enumerate(items):
            if isinstance(item, Record):
                where = f"{path}[{index}]" if type(value) is tuple else path
                found.extend(_paths(item, where))
    return found


def _altered(root: Record, pick: int, garbage: object, delete: bool) -> Record:
    """A deep copy of ``root`` with one field somewhere in it overwritten or deleted."""
    clone = copy.deepcopy(root)
    _, holder, name = _paths(clone)[pick % len(_paths(clone))]
    if delete:
        object.__delattr__(holder, name)
    else:
        object.__setattr__(holder, name, garbage)
    return clone


_GARBAGE = st.one_of(
    st.none(),
    st.integers(),
    st.text(max_size=3),
    st.lists(st.integers(), max_size=2),
    st.just(object()),
    st.just(()),
)

CALLS: dict[str, tuple[Record, Callable[[Any], object]]] = {
    "check_evidence_report": (REPORT, kernel.check_evidence_report),
    "render_markdown": (REPORT, kernel.render_markdown),
    "render_html": (REPORT, kernel.render_html),
    "render_json": (REPORT, kernel.render_json),
    "verify_decision(report)": (REPORT, lambda r: kernel.verify_decision(DECISION, r)),
    "verify_decision(decision)": (DECISION, lambda d: kernel.verify_decision(d, REPORT)),
    "build_evidence_report": (RUN, kernel.build_evidence_report),
    "verify_binding": (BINDING, lambda b: kernel.verify_binding(b, GRUN, RESULT)),
    "verify_binding(run)": (GRUN, lambda g: kernel.verify_binding(BINDING, g, RESULT)),
    "verify_binding_set": (GRUN, lambda g: kernel.verify_binding_set(g, [BINDING])),
}


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(sorted(CALLS)),
    st.integers(min_value=0),
    _GARBAGE,
    st.booleans(),
)
def test_an_altered_record_is_refused_or_named_never_a_foreign_exception(
    call: str, pick: int, garbage: object, delete: bool
) -> None:
    """For every public function here, any field anywhere in its record argument
    overwritten with any value (or deleted): the outcome is a result, a refusal, or an
    ParameterTypeError naming the altered field; nothing else escapes (no AttributeError,
    KeyError, nor a FieldError or CanonicalizationError from deep inside)."""
    root, function = CALLS[call]
    altered = _altered(root, pick, garbage, delete)
    named = ""
    try:
        function(altered)
    except ParameterTypeError as error:
        named = str(error)
    assert named == "" or "altered" in named


def test_the_altered_field_is_named() -> None:
    report = copy.deepcopy(REPORT)
    object.__setattr__(report, "warnings", "abc")
    with pytest.raises(
        ParameterTypeError, match=r"render_markdown\(\): report.warnings: .*altered"
    ):
        kernel.render_markdown(report)
    branch = kernel.Branch(
        branch_id="b1",
        drafts=tuple(
            kernel.Draft(output_digest="a" * 64, context_digest=c * 64, tools=("pytest",))
            for c in "12"
        ),
        verifier=kernel.VerifierOutcome.NONE,
    )
    object.__setattr__(branch, "drafts", "x")
    with pytest.raises(ParameterTypeError, match=r"branch.drafts: .*altered"):
        kernel.admit_to_commit(branch)
    binding = copy.deepcopy(BINDING)
    object.__setattr__(binding, "budget_charge", 0)
    refused = kernel.verify_binding(binding, GRUN, RESULT)
    assert isinstance(refused, kernel.CandidateAttemptRunBindingRefusal)
    assert refused.reason_codes == (kernel.RunAttemptBindingRefusalReason.MALFORMED_INPUT_FIELD,)


def test_malformed_finds_where_a_record_tree_breaks_its_annotations() -> None:
    assert malformed(REPORT, "report") is None
    assert malformed([REPORT, {"k": (RUN,)}], "args") is None
    report = copy.deepcopy(REPORT)
    object.__setattr__(report.summary, "supported", -1)
    assert malformed({"x": [report]}, "args") == (
        "args['x'][0].summary.supported",
        "expected an integer in 0..2**53-1, got -1",
    )
    object.__delattr__(report, "warnings")
    assert malformed(report) == ("warnings", "missing (deleted after construction)")
    looped = copy.deepcopy(BINDING)
    object.__setattr__(looped, "budget_charge", looped)
    found = malformed(looped)
    assert found is not None
    assert found[0] == "budget_charge"

    class Hostile(dict[str, object]):
        def items(self) -> Any:
            raise RuntimeError("no items")

    assert malformed(Hostile(a=1)) is None
    assert malformed(3) is None


@attrs.frozen(kw_only=True)
class Node(Record):
    """A record type that may hold another of its kind (kernel's own never do)."""

    name: str
    child: Node | None = None


def test_a_record_made_to_hold_itself_is_named_not_walked_forever() -> None:
    leaf = Node(name="leaf")
    root = Node(name="root", child=Node(name="mid", child=leaf))
    assert malformed(root) is None
    assert malformed((leaf, leaf), "shared") is None  # one record twice is no loop
    object.__setattr__(leaf, "child", root)
    assert malformed(root, "root") == ("root.child.child.child", "a record that holds itself")
