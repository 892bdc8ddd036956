"""Golden binding cases in fixtures/binding/: regenerated, diffed, ids recomputed.

Every case starts from the reference chain (fixtures/binding/reference-chain.json, a
copy of the origin implementation's fixture-a) and changes it as the case's name says.
Corruption cases change one field *without re-sealing* (as the reference's tests do);
boundary cases re-seal every id with the stdlib below, so their documents are honest.
Cases that need a record altered after construction (impossible through JSON) list
``forge`` steps, applied with ``object.__setattr__`` after parsing.

Regenerate after an intended change: ``python tests/test_binding_fixtures.py --write``.
"""

from __future__ import annotations

import copy
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from kernel.search.binding import (
    CandidateAttemptRunBinding,
    CandidateAttemptRunBindingRefusal,
    RunAttemptBindingRefusalReason,
    bind_candidate_attempt_to_run,
)
from kernel.search.records import CandidateOperatorResult, GeometricSearchRun

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures" / "binding"
REFERENCE = Path("/work/shared/reference/core/fixture-a.json")
CHAIN = FIXTURES / "reference-chain.json"

Doc = dict[str, Any]


def H(payload: object) -> str:
    """The normative identity: stdlib canonical JSON + SHA-256 (independent of kernel)."""
    text = json.dumps(payload, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def attempt_payload(attempt: Doc) -> Doc:
    """A CandidateAttempt's nested form: every field but explanation."""
    return {k: v for k, v in attempt.items() if k != "explanation"}


def attempt_id(attempt: Doc) -> str:
    """Self-sealed attempt_id."""
    return H({**attempt_payload(attempt), "attempt_id": ""})


def run_id(run: Doc) -> str:
    """Self-sealed run_id (attempts in nested form)."""
    payload = {k: v for k, v in run.items() if k != "explanation"}
    payload["candidate_attempts"] = [attempt_payload(a) for a in run["candidate_attempts"]]
    return H({**payload, "run_id": ""})


RESULT_FIELDS = (
    "operator_policy_version",
    "input_digest",
    "geometric_search_run_id",
    "attempt_id",
    "attempt_index",
    "candidate_digest",
    "candidate_reconstruction_digest",
    "candidate_organ",
    "operator_name",
    "operator_version",
    "reason_codes",
    "evidence_spans",
)


def result_id(result: Doc) -> str:
    """Self-sealed operator_result_id."""
    return H({**{k: result[k] for k in RESULT_FIELDS}, "operator_result_id": ""})


def input_digest(run: Doc, result: Doc, schema: list[Any], policy: list[Any]) -> str:
    """ADR-0232 section 15 input payload."""
    attempt = result["candidate_attempt"]
    return H(
        {
            "binding_policy_version": "candidate_attempt_run_binding.v1",
            "original_run_id": run["run_id"],
            "original_run_policy_version": run["run_policy_version"],
            "original_run_input_digest": run["input_digest"],
            "operator_result_id": result["operator_result_id"],
            "operator_policy_version": result["operator_policy_version"],
            "candidate_attempt_id": attempt["attempt_id"],
            "attempt_index": attempt["attempt_index"],
            "candidate_digest": attempt["candidate_digest"],
            "candidate_reconstruction_digest": result["candidate_reconstruction"][
                "candidate_reconstruction_digest"
            ],
            "operator_set_id": run["operator_set_id"],
            "operator_set_version": run["operator_set_version"],
            "budget_id": run["budget_id"],
            "gate_decision_id": run["gate_decision_id"],
            "residual_ids": run["residual_ids"],
            "problem_frame_digest": run["problem_frame_digest"],
            "original_contract_assessment_id": run["contract_assessment_id"],
            "schema_versions": schema,
            "policy_versions": policy,
        }
    )


def self_sealed(document: Doc, id_field: str) -> str:
    """Self-sealed id of a binding or refusal document (every field but explanation)."""
    payload = {k: v for k, v in document.items() if k != "explanation"}
    return H({**payload, id_field: ""})


def reseal(run: Doc, result: Doc) -> tuple[Doc, Doc]:
    """Re-seal a chain after edits: attempts, run, then the result bound to the run."""
    run = copy.deepcopy(run)
    result = copy.deepcopy(result)
    for attempt in run["candidate_attempts"]:
        attempt["attempt_id"] = attempt_id(attempt)
    run["run_id"] = run_id(run)
    attempt = result["candidate_attempt"]
    attempt["attempt_id"] = attempt_id(attempt)
    result["attempt_id"] = attempt["attempt_id"]
    result["attempt_index"] = attempt["attempt_index"]
    result["geometric_search_run_id"] = run["run_id"]
    result["operator_result_id"] = result_id(result)
    return run, result


def _existing(chain: Doc, index: int, tag: str) -> Doc:
    """A distinct, sealed earlier attempt at ``index`` for runs with history."""
    attempt = copy.deepcopy(chain["candidate_operator_result"]["candidate_attempt"])
    attempt["attempt_index"] = index
    attempt["candidate_digest"] = H({"existing": tag})
    attempt["input_digest"] = H({"input": tag})
    attempt["explanation"] = f"earlier attempt {tag}"
    attempt["attempt_id"] = attempt_id(attempt)
    return attempt  # type: ignore[no-any-return]


def build_cases(chain: Doc) -> dict[str, Doc]:
    """Every golden case (without its expected outcome), by name."""
    base_run: Doc = chain["geometric_search_run"]
    base_result: Doc = chain["candidate_operator_result"]
    cases: dict[str, Doc] = {}

    def case(name: str, description: str, *, sealed: bool = False, **edit: Any) -> None:
        run = copy.deepcopy(base_run)
        result = copy.deepcopy(base_result)
        for apply in edit.pop("edits", ()):
            apply(run, result)
        if sealed:
            run, result = reseal(run, result)
        cases[name] = {
            "description": description,
            "ids_reproduce": sealed or name == "reference-chain-binds",
            "run": None if edit.pop("no_run", False) else run,
            "operator_result": None if edit.pop("no_result", False) else result,
            "schema_versions": edit.pop("schema_versions", []),
            "policy_versions": edit.pop("policy_versions", []),
            "forge": edit.pop("forge", []),
        }
        assert not edit, edit

    def attempt(result: Doc) -> Doc:
        return result["candidate_attempt"]  # type: ignore[no-any-return]

    def recon(result: Doc) -> Doc:
        return result["candidate_reconstruction"]  # type: ignore[no-any-return]

    def consumed(run: Doc) -> Doc:
        return run["budget_consumed"]  # type: ignore[no-any-return]

    def history(run: Doc, indices: list[int]) -> None:
        run["candidate_attempts"] = [_existing(chain, i, str(i)) for i in indices]
        consumed(run)["candidates_considered"] = len(indices)
        consumed(run)["steps_used"] = len(indices)
        depths = [a["depth"] for a in run["candidate_attempts"]]
        consumed(run)["depth_reached"] = max([consumed(run)["depth_reached"], *depths])

    def at_index(result: Doc, index: int) -> None:
        attempt(result)["attempt_index"] = index
        result["attempt_index"] = index

    zero = "0" * 64
    one = "1" * 64
    # -- the reference chain and its refusal -----------------------------------------
    case("reference-chain-binds", "fixture-a as the origin implementation wrote it")
    case(
        "reference-refusal-run-result-mismatch",
        "fixture-a refusal_case: the result names another run",
        edits=[lambda r, o: o.update(geometric_search_run_id=zero)],
    )
    # -- one case per reason code the binding produces ------------------------------
    case("invalid-binding-input-run", "the run is None", no_run=True)
    case("invalid-binding-input-result", "the operator result is None", no_result=True)
    case(
        "invalid-binding-input-attempt",
        "the result's attempt is not a CandidateAttempt (forged)",
        forge=[{"path": "operator_result.candidate_attempt", "value": "not an attempt"}],
    )
    case(
        "unsupported-schema-version-unsorted",
        "schema version pairs out of order",
        schema_versions=[["b", "1"], ["a", "1"]],
    )
    case(
        "unsupported-schema-version-duplicate",
        "policy version pairs repeat a name",
        policy_versions=[["a", "1"], ["a", "2"]],
    )
    case(
        "attempt-result-mismatch-index",
        "the result repeats another attempt_index",
        edits=[lambda r, o: o.update(attempt_index=1)],
    )
    case(
        "attempt-result-mismatch-operator",
        "the result names another operator than its attempt",
        edits=[lambda r, o: o.update(operator_name="other_operator")],
    )
    case(
        "reconstruction-result-mismatch",
        "the reconstruction carries another reconstruction digest",
        edits=[lambda r, o: recon(o).update(candidate_reconstruction_digest=one)],
    )
    case(
        "replay-status-not-pending",
        "the attempt was already replayed",
        edits=[lambda r, o: attempt(o).update(replay_status="replay_closed")],
    )
    case(
        "replay-blockers-present",
        "the attempt carries a replay blocker",
        edits=[lambda r, o: attempt(o).update(replay_blockers=["blocked"])],
    )
    case(
        "run-identity-mismatch",
        "the reconstruction addresses a residual the run does not hold",
        edits=[lambda r, o: recon(o).update(source_residual_id=one)],
    )
    case(
        "operator-set-mismatch",
        "the reconstruction was built by another operator set version",
        edits=[
            lambda r, o: recon(o).update(
                operator_provenance=[
                    p if p[0] != "operator_set_version" else [p[0], "candidate_operators.v1"]
                    for p in recon(o)["operator_provenance"]
                ]
            )
        ],
    )
    case(
        "malformed-evidence-span",
        "the result's spans differ from its attempt's",
        edits=[
            lambda r, o: o.update(
                evidence_spans=[{"text": "other", "start": 0, "end": 5, "sentence_index": 0}]
            )
        ],
    )
    case(
        "duplicate-attempt-index",
        "the run already holds an attempt at index 0",
        edits=[lambda r, o: r.update(candidate_attempts=[_existing(chain, 0, "dup")])],
    )
    case(
        "duplicate-attempt-id",
        "the run already holds this very attempt (at index 1)",
        edits=[
            lambda r, o: r.update(
                candidate_attempts=[{**attempt(o), "attempt_index": 1, "candidate_digest": one}]
            )
        ],
    )
    case(
        "duplicate-candidate-digest",
        "the run already holds this candidate (another attempt, index 1)",
        edits=[
            lambda r, o: r.update(
                candidate_attempts=[
                    {**_existing(chain, 1, "x"), "candidate_digest": attempt(o)["candidate_digest"]}
                ]
            )
        ],
    )
    case(
        "missing-candidate-reconstruction",
        "the result carries no reconstruction (forged; the reference raises)",
        forge=[{"path": "operator_result.candidate_reconstruction", "value": None}],
    )
    case(
        "missing-budget-charge",
        "the attempt carries no budget charge (forged; the reference raises)",
        forge=[{"path": "operator_result.candidate_attempt.budget_charge", "value": None}],
    )
    case(
        "malformed-input-field-bool-index",
        "attempt_index is the bool false (forged on result and attempt)",
        forge=[
            {"path": "operator_result.attempt_index", "value": False},
            {"path": "operator_result.candidate_attempt.attempt_index", "value": False},
        ],
    )
    case(
        "unsupported-run-policy",
        "the run declares another run policy",
        sealed=True,
        edits=[lambda r, o: r.update(run_policy_version="geometric_search_run.v2")],
    )
    case(
        "unsupported-operator-policy",
        "the result declares another operator policy",
        sealed=True,
        edits=[lambda r, o: o.update(operator_policy_version="candidate_operator.v2")],
    )
    case(
        "unsupported-binding-policy",
        "the caller declares another binding policy",
        policy_versions=[["candidate_attempt_run_binding", "candidate_attempt_run_binding.v2"]],
    )
    case(
        "non-positive-budget-charge",
        "the attempt charges zero candidates",
        sealed=True,
        edits=[lambda r, o: attempt(o)["budget_charge"].update(candidates=0)],
    )
    case(
        "unsupported-parallelism",
        "the run allows parallelism 2",
        sealed=True,
        edits=[lambda r, o: consumed(r).update(max_parallelism=2)],
    )
    case(
        "ambiguous-attempt-order",
        "the run holds attempts 1, 0 (out of order); the candidate declares 2",
        sealed=True,
        edits=[lambda r, o: history(r, [1, 0]), lambda r, o: at_index(o, 2)],
    )
    case(
        "attempt-index-gap",
        "the run is empty; the candidate declares index 1",
        sealed=True,
        edits=[lambda r, o: at_index(o, 1)],
    )
    # -- budget boundaries (sealed: honest documents) ---------------------------------
    case(
        "candidates-4-of-5-binds",
        "4 of 5 candidates considered; a charge of 1 fits",
        sealed=True,
        edits=[lambda r, o: consumed(r).update(candidates_considered=4)],
    )
    case(
        "candidates-5-of-5-refuses",
        "5 of 5 candidates considered; a charge of 1 does not fit",
        sealed=True,
        edits=[lambda r, o: consumed(r).update(candidates_considered=5)],
    )
    case(
        "steps-9-of-10-binds",
        "9 of 10 steps used; a charge of 1 fits",
        sealed=True,
        edits=[lambda r, o: consumed(r).update(steps_used=9)],
    )
    case(
        "steps-10-of-10-refuses",
        "10 of 10 steps used; a charge of 1 does not fit",
        sealed=True,
        edits=[lambda r, o: consumed(r).update(steps_used=10)],
    )
    case(
        "depth-equals-max-binds",
        "attempt depth 2 with max_depth 2",
        sealed=True,
        edits=[lambda r, o: attempt(o).update(depth=2)],
    )
    case(
        "depth-max-plus-one-refuses",
        "attempt depth 3 with max_depth 2",
        sealed=True,
        edits=[lambda r, o: attempt(o).update(depth=3)],
    )
    case(
        "parallelism-used-2-refuses",
        "the run already uses parallelism 2 > 1",
        sealed=True,
        edits=[lambda r, o: consumed(r).update(parallelism_used=2)],
    )
    case(
        "run-accounting-understated-refuses",
        "the run holds attempts 0 and 1 but declares one candidate considered",
        sealed=True,
        edits=[
            lambda r, o: history(r, [0, 1]),
            lambda r, o: consumed(r).update(candidates_considered=1),
            lambda r, o: at_index(o, 2),
        ],
    )
    case(
        "continuation-index-2-binds",
        "the run holds attempts 0 and 1; the candidate declares 2",
        sealed=True,
        edits=[lambda r, o: history(r, [0, 1]), lambda r, o: at_index(o, 2)],
    )
    return cases


def materialize(case: Doc) -> tuple[object, object]:
    """Parse a case's documents (ids not verified) and apply its forge steps."""
    run: object = (
        None if case["run"] is None else GeometricSearchRun.from_dict(case["run"], verify_ids=False)
    )
    result: object = (
        None
        if case["operator_result"] is None
        else CandidateOperatorResult.from_dict(case["operator_result"], verify_ids=False)
    )
    roots = {"run": run, "operator_result": result}
    for step in case["forge"]:
        root, *attributes = step["path"].split(".")
        target = roots[root]
        for name in attributes[:-1]:
            target = getattr(target, name)
        object.__setattr__(target, attributes[-1], step["value"])
    return run, result


def outcome_of(case: Doc) -> CandidateAttemptRunBinding | CandidateAttemptRunBindingRefusal:
    """Bind a case's inputs."""
    run, result = materialize(case)
    return bind_candidate_attempt_to_run(
        original_run=run,  # type: ignore[arg-type]
        candidate_operator_result=result,  # type: ignore[arg-type]
        schema_versions=tuple(tuple(p) for p in case["schema_versions"]),
        policy_versions=tuple(tuple(p) for p in case["policy_versions"]),
    )


def render(value: object) -> str:
    """Golden file text: sorted, indented, trailing newline."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, indent=1) + "\n"


def generate() -> dict[str, str]:
    """Every fixture file's expected text, by path relative to fixtures/binding."""
    chain = json.loads(CHAIN.read_text("utf-8"))
    files: dict[str, str] = {}
    for name, case in build_cases(chain).items():
        case["expected"] = outcome_of(case).to_dict()
        files[f"cases/{name}.json"] = render(case)
    return files


GENERATED = generate()


def test_reference_chain_is_the_reference_fixture() -> None:
    """fixtures/binding/reference-chain.json is byte-for-byte the shared reference fixture."""
    if REFERENCE.exists():
        assert json.loads(CHAIN.read_text("utf-8")) == json.loads(REFERENCE.read_text("utf-8"))
    chain = json.loads(CHAIN.read_text("utf-8"))
    assert chain["binding"]["binding_id"] == (
        "2906352fa8ecead9ecf84829a0ef456b37f790b1d2c86cb09d174765f10c3434"
    )


def test_golden_files_are_current() -> None:
    """Regenerating every case yields exactly the files on disk (and no stale file)."""
    on_disk = {
        str(path.relative_to(FIXTURES)): path.read_text("utf-8")
        for path in sorted((FIXTURES / "cases").glob("*.json"))
    }
    assert on_disk == GENERATED


@pytest.mark.parametrize("name", sorted(GENERATED))
def test_golden_ids_recompute_independently(name: str) -> None:
    """Each golden outcome's ids recompute with the stdlib from the case's documents."""
    case = json.loads(GENERATED[name])
    expected = case["expected"]
    if "binding_id" in expected:
        attempt = case["operator_result"]["candidate_attempt"]
        assert expected["binding_id"] == self_sealed(expected, "binding_id")
        assert expected["input_digest"] == input_digest(
            case["run"], case["operator_result"], case["schema_versions"], case["policy_versions"]
        )
        assert expected["candidate_attempt_ref"] == H(attempt_payload(attempt))
        assert expected["run_attempt_membership"] == "structurally_bound"
        assert expected["reason_codes"] == []
    else:
        assert expected["binding_refusal_id"] == self_sealed(expected, "binding_refusal_id")
        assert expected["input_digest"] is None
        assert len(expected["reason_codes"]) == 1
    if case["ids_reproduce"]:
        run, result = case["run"], case["operator_result"]
        assert run["run_id"] == run_id(run)
        assert result["operator_result_id"] == result_id(result)
        assert result["candidate_attempt"]["attempt_id"] == attempt_id(result["candidate_attempt"])


def test_every_bind_reason_code_has_a_golden_case() -> None:
    """Each code `bind_candidate_attempt_to_run` can produce has a golden refusal."""
    verifier_only = {
        RunAttemptBindingRefusalReason.BINDING_ID_MISMATCH,
        RunAttemptBindingRefusalReason.INPUT_DIGEST_MISMATCH,
        RunAttemptBindingRefusalReason.CANDIDATE_ATTEMPT_REF_MISMATCH,
        RunAttemptBindingRefusalReason.BINDING_RECORD_MISMATCH,
        RunAttemptBindingRefusalReason.EMPTY_BINDING_SET,
    }
    seen = {
        code
        for text in GENERATED.values()
        for code in json.loads(text)["expected"].get("reason_codes", [])
    }
    assert seen == {code.value for code in RunAttemptBindingRefusalReason} - verifier_only


def test_boundary_outcomes() -> None:
    """4/5 and 9/10 bind, 5/5 and 10/10 refuse; depth max binds, max+1 refuses; par 2 refuses."""
    kinds = {name: json.loads(text)["expected"] for name, text in GENERATED.items()}
    for name in (
        "cases/candidates-4-of-5-binds.json",
        "cases/steps-9-of-10-binds.json",
        "cases/depth-equals-max-binds.json",
        "cases/continuation-index-2-binds.json",
        "cases/reference-chain-binds.json",
    ):
        assert "binding_id" in kinds[name], name
    for name in (
        "cases/candidates-5-of-5-refuses.json",
        "cases/steps-10-of-10-refuses.json",
        "cases/depth-max-plus-one-refuses.json",
        "cases/parallelism-used-2-refuses.json",
    ):
        assert kinds[name]["reason_codes"] == ["budget_charge_exceeds_remaining"], name


def test_reference_outcomes_are_the_reference_records() -> None:
    """The reference chain's binding and refusal equal fixture-a's, field for field."""
    chain = json.loads(CHAIN.read_text("utf-8"))
    bound = json.loads(GENERATED["cases/reference-chain-binds.json"])["expected"]
    refused = json.loads(GENERATED["cases/reference-refusal-run-result-mismatch.json"])
    assert bound == chain["binding"]
    reference = chain["refusal_case"]["refusal"]
    # Every field but the prose is the reference's; the prose starts with the
    # reference's sentence, then says what was expected and found (issue 11).
    assert {**refused["expected"], "explanation": ""} == {**reference, "explanation": ""}
    assert refused["expected"]["explanation"].startswith(reference["explanation"] + " ")


if __name__ == "__main__":  # pragma: no cover - the regeneration entry point
    if sys.argv[1:] != ["--write"]:
        raise SystemExit("usage: python tests/test_binding_fixtures.py --write")
    (FIXTURES / "cases").mkdir(parents=True, exist_ok=True)
    for stale in (FIXTURES / "cases").glob("*.json"):
        stale.unlink()
    for relative, text in GENERATED.items():
        (FIXTURES / relative).write_text(text, "utf-8")
    print(f"wrote {len(GENERATED)} cases to {FIXTURES / 'cases'}")
