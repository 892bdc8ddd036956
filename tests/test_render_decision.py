"""The report reads right (issue 22 item 6): the decision first, red only for real
disagreement (one candidate judged two ways), isolation and limits in both views, the
worker's output tail, ids that never wrap inside."""

from __future__ import annotations

import re
from pathlib import Path

import attrs
import pytest

from kernel.corroboration.run_admission import build_run_admission
from kernel.effects import console
from kernel.effects.orchestrate import load_config, run_loaded
from kernel.run.record import CommandUid, IsolationPolicy, SandboxRun
from kernel.run.report import EvidenceState, RunEvidenceReport, build_evidence_report
from kernel.run.verification import Isolation, SandboxLimit
from kernel.views import (
    CheckOutputView,
    TableSection,
    Workspace,
    decision_headline,
    render_html,
    render_markdown,
)
from kernel.views.admission import admission_headline, admission_section

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
A, B = "a" * 64, "b" * 64
GIB = 2**30


def _report(name: str = "two-attempt-good-vs-bad") -> RunEvidenceReport:
    report = build_evidence_report(run_loaded(load_config(FIXTURES / f"orchestration/{name}.json")))
    assert isinstance(report, RunEvidenceReport)
    return report


def _with_candidates(report: RunEvidenceReport, *digests: str) -> RunEvidenceReport:
    attempts = []
    for attempt, digest in zip(report.attempts, digests, strict=True):
        manifest = attempt.manifest
        assert manifest is not None
        attempts.append(
            attrs.evolve(attempt, manifest=attrs.evolve(manifest, candidate_digest=digest))
        )
    return attrs.evolve(report, attempts=tuple(attempts))


def _section(report: RunEvidenceReport) -> TableSection:
    ids = [a.attempt_id for a in report.attempts]
    admission = build_run_admission(
        report, candidates={ids[0]: A, ids[1]: B}, contexts={}, corroborations={}
    )
    return admission_section(admission)


def _text(page: str) -> str:
    """The page's text (tags dropped), for reading order and wording."""
    return re.sub(r"<[^>]+>", "", page)


def test_the_decision_comes_first_in_both_views() -> None:
    """The answer (the candidate to accept) and the evidence classes come before the
    attempt table, which comes before the run's identities and the warnings."""
    report = _report()
    section = _section(report)
    page = render_html(report, [section])
    text = _text(page)
    assert text.index("Decision\n") < text.index("Candidate to accept:")
    assert text.index("Candidate to accept:") < text.index("Evidence classes of")
    assert text.index("Evidence classes of") < text.index("Attempts\n#")
    assert page.index('id="attempts"') < page.index('id="run"') < page.index('id="warnings"')
    assert '<p class="headline go">' in page
    markdown = render_markdown(report, [section])
    heads = [line for line in markdown.splitlines() if line.startswith("## ")]
    assert heads[:2] == ["## Decision", "## Attempts"]
    assert heads[-3:] == ["## Run", "## Warnings", "## Authority boundary"]
    decision = markdown.split("## Decision", 1)[1].split("## Attempts", 1)[0]
    assert decision.lstrip().startswith("**Candidate to accept: aaaaaaaaaaaa")
    assert "### Evidence classes of candidate groups" in decision


def test_different_candidates_judged_differently_is_not_red() -> None:
    """A wrong and a right candidate: IDKMesh's flag stays true and is explained in a
    neutral note; no red banner, no alert role."""
    report = _with_candidates(_report(), A, B)
    assert report.summary.verification_disagreement
    page = render_html(report, [_section(report)])
    assert 'class="banner"' not in page
    assert 'role="alert"' not in page
    assert "Recommendations differ across candidates" in page
    markdown = render_markdown(report)
    assert "- **Recommendations differ across candidates:** yes (accept_candidate," in markdown
    assert "- **Same candidate judged differently:** no" in markdown
    assert "> **Same candidate judged differently" not in markdown


def test_one_candidate_judged_two_ways_is_red_in_both_views() -> None:
    """The same patch accepted once and rejected once is a real disagreement: a red
    alert naming the candidate, both attempts and what differed; the note gives way."""
    report = _with_candidates(_report(), A, A)
    page = render_html(report)
    banner = page.split('<div class="banner" role="alert">', 1)[1].split("</div>", 1)[0]
    assert "Same candidate judged differently:" in banner
    assert "aaaaaaaaaaaa\u2026" in banner
    assert "attempt-001, attempt-002" in banner
    assert "recommendations accept_candidate, reject_candidate" in banner
    assert "status of check(s) independent-acceptance" in banner
    assert 'class="note"' not in page
    markdown = render_markdown(report)
    assert "> **Same candidate judged differently:** candidate aaaaaaaaaaaa" in markdown
    assert "- **Same candidate judged differently:** yes" in markdown


def test_headline_without_a_decision_section_says_what_the_report_says() -> None:
    """With no admission section (e.g. `kernel report render`), the headline names the
    supported attempts, or says there is nothing to accept, grey not green."""
    report = _report()
    assert decision_headline(report).startswith("Supported by independent evidence: attempt-001.")
    rejected = attrs.evolve(
        report,
        attempts=tuple(
            attrs.evolve(a, evidence_state=EvidenceState.REJECTED) for a in report.attempts
        ),
    )
    none = "Nothing to accept: no attempt is supported by independent evidence."
    assert decision_headline(rejected) == none
    assert '<p class="headline none">' in render_html(rejected)
    assert f"**{none}**" in render_markdown(rejected)


def test_admission_headline_names_the_verified_candidates_or_why_none() -> None:
    """One verified group: the candidate to accept; several: all of them, unranked; none:
    each group's reason, or that no attempt produced a candidate."""
    report = _report()
    admission = build_run_admission(
        report,
        candidates={a.attempt_id: d for a, d in zip(report.attempts, (A, B), strict=True)},
        contexts={},
        corroborations={},
    )
    verified, rejected = admission.groups
    assert admission_headline(admission).startswith("Candidate to accept: aaaaaaaaaaaa\u2026 (")
    two = attrs.evolve(admission, groups=(verified, attrs.evolve(verified, candidate_digest=B)))
    assert admission_headline(two).startswith("2 verified candidates: aaaaaaaaaaaa\u2026")
    assert "nothing here ranks them" in admission_headline(two)
    none = attrs.evolve(admission, groups=(rejected,))
    assert admission_headline(none) == (
        "No candidate to accept: bbbbbbbbbbbb\u2026 (attempt-002): not admitted"
        " (verifier_rejected)."
    )
    empty = attrs.evolve(admission, groups=())
    assert admission_headline(empty) == "No candidate to accept: no attempt produced a candidate."


def _sandboxed(report: RunEvidenceReport, policy: IsolationPolicy | None) -> RunEvidenceReport:
    limits = (
        SandboxLimit(kind="memory", value=2 * GIB, mechanism="cgroup_v1"),
        SandboxLimit(kind="processes", value=512, mechanism="rlimit"),
        SandboxLimit(kind="cpu", value=600, mechanism="rlimit"),
        SandboxLimit(kind="output", value=256 * 2**20, mechanism="runner"),
        SandboxLimit(kind="tmp", value=3 * 2**10, mechanism="tmpfs"),
        SandboxLimit(kind="writable", value=1000, mechanism="tmpfs"),
        SandboxLimit(kind="network", value=None, mechanism="none"),
    )
    first, second = report.attempts
    return attrs.evolve(
        report,
        isolation_policy=policy,
        attempts=(
            attrs.evolve(
                first,
                worker_sandbox=SandboxRun(
                    isolation=Isolation.OVERLAY, limits=limits, command_uid=CommandUid.SUBORDINATE
                ),
            ),
            attrs.evolve(second, worker_sandbox=SandboxRun(isolation=Isolation.COPY, limits=())),
        ),
    )


@pytest.mark.parametrize(
    ("policy", "said"),
    [
        (None, "Isolation accepted by the run: not recorded."),
        (
            IsolationPolicy(minimum=Isolation.OVERLAY, accept_below_overlay=False),
            "minimum overlay; evidence below overlay never grounds for verified",
        ),
        (
            IsolationPolicy(minimum=Isolation.COPY, accept_below_overlay=True),
            "minimum copy; evidence below overlay accepted as grounds for verified",
        ),
    ],
)
def test_isolation_and_limits_are_in_both_views(policy: IsolationPolicy | None, said: str) -> None:
    """Each sandboxed run's isolation, who its command was on the host (when
    recorded) and every limit (value, unit, mechanism), the weakest isolation per
    attempt, and the isolation the run accepted."""
    report = _sandboxed(_report(), policy)
    limits = (
        "overlay, command uid subordinate; memory 2 GiB (cgroup_v1), processes 512 (rlimit),"
        " cpu 600 s (rlimit), output 256 MiB (runner), tmp 3 KiB (tmpfs), writable 1000 B (tmpfs),"
        " network none (none)"
    )
    # Markdown escapes ( and ) in cells: compare the text a reader sees.
    for view in (_text(render_html(report)), render_markdown(report).replace("\\", "")):
        assert limits in view
        assert "copy; no limits" in view
        assert said in view
    page = render_html(report)
    assert '<td data-label="Isolation"><a href="#isolation">copy</a></td>' in page
    assert '<h2 id="isolation">Isolation and limits</h2>' in page
    unsandboxed = render_html(_report())
    assert 'id="isolation"' not in unsandboxed
    assert "not sandboxed" in unsandboxed


def test_the_worker_output_tail_is_shown_and_linked() -> None:
    """A worker's output tail (a crash's included) has its section, linked from its row,
    in both views; the text is escaped."""
    report = _report()
    first = report.attempts[0].attempt_id
    tail = CheckOutputView.of(first, "worker", b"--- stderr ---\nSegmentation <fault>\n")
    space = Workspace(worker_outputs=(tail,))
    page = render_html(report, (), space)
    assert '<a href="#worker-1">output</a>' in page
    assert '<h2 id="worker-outputs">Worker outputs</h2>' in page
    assert '<h3 id="worker-1">' in page
    assert "Segmentation &lt;fault&gt;" in page
    assert f'href="checks/{tail.digest}.txt"' in page
    markdown = render_markdown(report, (), space)
    assert "## Worker outputs" in markdown
    assert f"### {first}: worker" in markdown
    assert "Segmentation <fault>" in markdown  # inside a fence, literal
    assert space.worker_output_of("nope") is None


def test_ids_never_wrap_inside_and_no_means_no_colour() -> None:
    """Ids are kept whole (clipped with an ellipsis, full value in the title); nothing
    may break anywhere; "Granted: no" is plain text, not a green "good"."""
    report = _report()
    page = render_html(report, [_section(report)])
    assert '<span class="id" title="attempt-001">attempt-001</span>' in page
    assert "overflow-wrap:anywhere}" not in page.split("pre.diff{", 1)[0]
    assert ".id{display:inline-block;max-width:100%;white-space:nowrap" in page
    assert "<td>no</td>" in page
    assert "#0f5132}" not in page.split(".auth", 1)[1].split("\n", 1)[0]


def test_the_banner_says_only_what_differed() -> None:
    """Same recommendation with one check differing names only the check; differing
    recommendations over identical checks name only the recommendations."""
    report = _with_candidates(_report(), A, A)
    good, bad = (a.verification for a in report.attempts)
    assert good is not None
    assert bad is not None
    same_checks = attrs.evolve(bad, checks=good.checks)
    same_call = attrs.evolve(bad, recommendation=good.recommendation)
    for verification, said, unsaid in (
        (same_checks, "(recommendations accept_candidate, reject_candidate)", "status of"),
        (same_call, "(status of check(s) independent-acceptance)", "recommendations "),
    ):
        changed = attrs.evolve(
            report,
            attempts=(
                report.attempts[0],
                attrs.evolve(report.attempts[1], verification=verification),
            ),
        )
        banner = render_html(changed).split('role="alert">', 1)[1].split("</div>", 1)[0]
        assert said in banner
        assert unsaid not in banner


def test_progress_names_the_evidence_state(capsys: pytest.CaptureFixture[str]) -> None:
    """Regression: `-v` printed "attempt-2: verified" for a rejected attempt ("verified"
    is the control state); progress now names the evidence state."""
    level = console.verbosity()
    console.set_verbosity(1)
    try:
        run_loaded(load_config(FIXTURES / "orchestration/two-attempt-good-vs-bad.json"))
    finally:
        console.set_verbosity(level)
    err = capsys.readouterr().err
    assert re.search(r"attempt attempt-001: supported \(\d+ ms\)", err)
    assert re.search(r"attempt attempt-002: rejected \(\d+ ms\)", err)
    assert ": verified (" not in err
