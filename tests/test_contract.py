"""The outcome contract of every public function, attacked with garbage and stray records.

For every function `kernel` exports: whatever a caller passes, the call returns (a
result or a refusal) or raises `KernelError`/``TypeError``, never a foreign exception
(``AttributeError``, ``KeyError``, a bare ``ValueError``...). Pure validators
(``build_*``/``check_*``/``verify_*``/``record_*``/``admit_*``) raise
`ParameterTypeError` for a wrong argument type, naming the parameter; ADR-0232's binding
functions refuse instead, as the reference does. Every refusal class needs a reason
code and an explanation; `unwrap` is the one raising helper.
"""

from __future__ import annotations

import enum
import inspect
import re
import typing
import warnings
from collections.abc import Callable

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kernel
from kernel.errors import FieldError, KernelError, ParameterTypeError, RefusedError
from kernel.records.values import Refusal, unwrap
from kernel.run.record import DeclaredReplay
from kernel.run.replay import ReplayCheck, ReplayMode, ReplayReason
from kernel.strategies import (
    branches,
    candidate_operator_results,
    decisions,
    geometric_search_runs,
    reports,
    result_manifests,
    run_observations,
    run_records,
    verification_results,
    work_units,
)

FUNCTIONS: dict[str, Callable[..., object]] = {
    name: getattr(kernel, name)
    for name in kernel.__all__
    if inspect.isfunction(getattr(kernel, name))
}
VALIDATOR_PREFIXES = ("build_", "check_", "verify_", "record_", "admit_")
REFERENCE_BOUND = frozenset(
    {"bind_candidate_attempt_to_run", "verify_binding", "verify_binding_set"}
)  # ADR-0232: the reference refuses wrong input types (invalid_binding_input)

_records: st.SearchStrategy[object] = st.one_of(
    branches(),
    work_units(),
    geometric_search_runs(),
    candidate_operator_results(),
    run_records(max_attempts=2),
    decisions(),
)
_scalars: st.SearchStrategy[object] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True),
    st.text(max_size=5),
    st.binary(max_size=4),
    st.sampled_from([kernel.EvidenceClass.VERIFIED, kernel.ReplayMode.EXACT, object(), int]),
)
GARBAGE: st.SearchStrategy[object] = st.one_of(
    _scalars,
    _records,
    st.lists(st.one_of(_scalars, _records), max_size=3),
    st.lists(_scalars, max_size=3).map(tuple),
    st.dictionaries(st.text(max_size=3), _scalars, max_size=3),
)
"""Values of every JSON and Python shape, and valid records of the wrong kind."""


def _for_type(hint: object) -> st.SearchStrategy[object] | None:
    """A strategy of valid values for the record types our strategies build."""
    table: dict[object, st.SearchStrategy[object]] = {
        kernel.Branch: branches(),
        kernel.WorkUnit: work_units(),
        kernel.ResultManifest: result_manifests(),
        kernel.VerificationResult: verification_results(),
        kernel.RunRecord: run_records(max_attempts=3),
        kernel.RunEvidenceReport: reports(max_attempts=3),
        kernel.HumanDecisionRecord: decisions(),
        kernel.GeometricSearchRun: geometric_search_runs(),
        kernel.CandidateOperatorResult: candidate_operator_results(),
    }
    if isinstance(hint, typing.Hashable) and hint in table:
        return table[hint]
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return st.sampled_from(list(hint))
    if hint is str:
        return st.text(max_size=8)
    members = [m for m in typing.get_args(hint) if m is not type(None)]
    if (
        typing.get_origin(hint) is not None
        and members
        and typing.get_origin(hint)
        in (
            typing.Union,
            type(int | None),
        )
    ):
        inner = [s for m in members if (s := _for_type(m)) is not None]
        return st.one_of(st.none(), *inner) if inner else None
    return None


def _arguments(function: Callable[..., object]) -> st.SearchStrategy[dict[str, object]]:
    """Each parameter: a well-typed value when we can build one, else garbage (mixed)."""
    hints = typing.get_type_hints(function)
    fields: dict[str, st.SearchStrategy[object]] = {}
    for name, parameter in inspect.signature(function).parameters.items():
        if parameter.kind is parameter.VAR_KEYWORD:
            continue
        valid = _for_type(hints.get(name))
        fields[name] = GARBAGE if valid is None else st.one_of(valid, valid, GARBAGE)
    return st.fixed_dictionaries(fields)


def _call(function: Callable[..., object], arguments: dict[str, object]) -> object:
    signature = inspect.signature(function)
    args, kwargs = [], {}
    for name, value in arguments.items():
        kind = signature.parameters[name].kind
        if kind is inspect.Parameter.POSITIONAL_ONLY:
            args.append(value)
        else:
            kwargs[name] = value
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return function(*args, **kwargs)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_no_foreign_exception_escapes(name: str, data: st.DataObject) -> None:
    """Whatever is passed, a public function returns or raises KernelError/TypeError,
    of a class (or a subclass of one) its docstring's ``Raises:`` section names."""
    function = FUNCTIONS[name]
    arguments = data.draw(_arguments(function))
    try:
        _call(function, arguments)
    except (KernelError, TypeError) as error:
        raised: Exception = error
    else:
        return
    assert str(raised)  # every error says what went wrong
    raises = (function.__doc__ or "").partition("Raises:")[2]
    named = (re.search(rf"^ +{kind.__name__}:", raises, re.M) for kind in type(raised).__mro__)
    assert any(named), f"{name} raised {type(raised).__name__}, not in its Raises section"


VALIDATORS = sorted(
    name
    for name in FUNCTIONS
    if name.startswith(VALIDATOR_PREFIXES) and name not in REFERENCE_BOUND
)


@pytest.mark.parametrize("name", VALIDATORS)
def test_wrong_first_argument_is_an_argument_type_error(name: str) -> None:
    """Every pure validator refuses a wrong argument type the same way, naming it."""
    function = FUNCTIONS[name]
    hints = typing.get_type_hints(function)
    first = next(
        name for name in inspect.signature(function).parameters if hints[name] is not object
    )
    with pytest.raises(ParameterTypeError) as caught:
        _call(function, {first: object()})
    assert caught.value.function == function.__qualname__
    assert caught.value.path == first
    assert caught.value.found == "object"
    assert isinstance(caught.value, TypeError)


@pytest.mark.parametrize("name", VALIDATORS)
def test_validators_document_the_error_they_raise(name: str) -> None:
    """Each validator carries the argument check (its wrapper) and says what it returns."""
    function = FUNCTIONS[name]
    assert hasattr(function, "__wrapped__"), name
    assert function.__doc__


@given(run_observations(min_runs=1, max_runs=2))
def test_argument_errors_name_the_item_path(runs: tuple[kernel.RunObservation, ...]) -> None:
    """A wrong item inside a sequence argument is named by its index."""
    path = rf"observations\[{len(runs)}\]: expected RunObservation, got str"
    with pytest.raises(ParameterTypeError, match=path):
        kernel.build_consensus((*runs, "not an observation"))  # type: ignore[arg-type]


def _filler(hint: object) -> object:
    """A valid value of a refusal's field type (digests for strings, zero for ints)."""
    args = typing.get_args(hint)
    if type(None) in args:
        return None
    if typing.get_origin(hint) is typing.Literal:
        return args[0]
    if typing.get_origin(hint) is tuple:
        return ()
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return next(iter(hint))
    if hint is ReplayCheck:  # a mismatching check carrying the first ReplayReason
        return ReplayCheck(
            mode=ReplayMode.EXACT,
            declared_replay=DeclaredReplay.DETERMINISTIC,
            outputs_compared=True,
            match=False,
            reason_codes=(next(iter(ReplayReason)),),
            first_difference="$.config_digest",
            saved_digest=None,
            replayed_digest=None,
            saved_compared_digest=None,
            replayed_compared_digest=None,
        )
    return {int: 0, bool: False}.get(hint, "a" * 64)  # type: ignore[call-overload]


def _refusal_classes() -> list[type[Refusal]]:
    classes = {getattr(kernel, name) for name in kernel.__all__}
    return sorted(
        (c for c in classes if isinstance(c, type) and issubclass(c, Refusal) and c is not Refusal),
        key=lambda cls: cls.__name__,
    )


@pytest.mark.parametrize("cls", _refusal_classes(), ids=lambda cls: cls.__name__)
def test_a_refusal_without_a_reason_code_cannot_exist(cls: type[Refusal]) -> None:
    """Building (or sealing) a refusal with no reason code or no explanation is impossible."""
    hints = typing.get_type_hints(cls)
    code = next(iter(typing.get_args(hints["reason_codes"])[0]))
    fields: dict[str, object] = {}
    for field in attrs.fields(cls):
        if field.name in ("reason_codes", "explanation"):
            continue
        fields[field.name] = _filler(hints[field.name])
    cls(**fields, reason_codes=(code,), explanation="why")  # the filler is valid
    with pytest.raises(FieldError, match="reason code") as caught:
        cls(**fields, reason_codes=(), explanation="why")
    assert caught.value.kernel_field == "reason_codes"
    assert caught.value.record == cls.__name__
    with pytest.raises(FieldError, match="explanation"):
        cls(**fields, reason_codes=(code,), explanation=" ")


def test_unwrap_is_the_one_raising_helper() -> None:
    """unwrap returns results and raises a refusal's own error family."""
    refusal = kernel.admit_to_commit(
        kernel.Branch(branch_id="b", drafts=(), verifier=kernel.VerifierOutcome.NONE)
    )
    assert isinstance(refusal, kernel.CommitRefusal)
    with pytest.raises(kernel.CommitBoundaryError) as caught:
        unwrap(refusal)
    assert caught.value.refusal is refusal
    assert isinstance(caught.value, RefusedError)
    assert "no_drafts" in str(caught.value)
    assert unwrap(3) == 3
    raising = sorted(
        name
        for name in kernel.__all__
        if "raise" in name or name.startswith("require_") or name == "unwrap"
    )
    assert raising == ["unwrap"]
