"""The run admission as a reviewer reads it: the headline sentence and the evidence-class
table section of the Markdown and HTML views (`kernel.corroboration.run_admission`
builds the record; presentation lives here, so the domain never imports the views)."""

from __future__ import annotations

from typing import Final

from kernel.corroboration.commit_admission import EvidenceClass
from kernel.corroboration.run_admission import CandidateGroup, RunAdmission
from kernel.records.values import short_digest
from kernel.views.views import TableSection

__all__ = ["admission_headline", "admission_section"]

_SECTION_NOTE: Final = (
    "Each candidate group (attempts whose patches are byte-identical) gets an evidence "
    "class: verified only when an independent verifier passed it, corroborated_only when "
    "only reruns agree, never on evidence gathered below overlay isolation unless the "
    "config accepts it. This is not a selection: the human decision stays pending."
)


def _class_text(group: CandidateGroup) -> str:
    text = (
        str(group.evidence_class)
        if group.evidence_class is not None
        else "not admitted (" + ", ".join(group.refusal_reasons) + ")"
    )
    if group.verifier_pass_discounted:
        text += (
            f"; verifier pass not counted: evidence gathered at {group.isolation} isolation, "
            "below overlay, which the config does not accept"
        )
    return text


def _group_label(group: CandidateGroup) -> str:
    return f"{short_digest(group.candidate_digest)} ({', '.join(group.attempt_ids)})"


def admission_headline(admission: RunAdmission) -> str:
    """The answer a reviewer reads first: the verified candidate to accept (a human
    decides), several to choose from (nothing here ranks them), or why none is."""
    verified = [g for g in admission.groups if g.evidence_class is EvidenceClass.VERIFIED]
    if len(verified) == 1:
        return (
            f"Candidate to accept: {_group_label(verified[0])}, verified by the independent"
            " verifier. Nothing is accepted until a human records a decision."
        )
    if verified:
        return (
            f"{len(verified)} verified candidates: "
            + "; ".join(_group_label(g) for g in verified)
            + ". A human chooses; nothing here ranks them."
        )
    why = "; ".join(f"{_group_label(g)}: {_class_text(g)}" for g in admission.groups)
    return "No candidate to accept: " + (why or "no attempt produced a candidate") + "."


def admission_section(admission: RunAdmission) -> TableSection:
    """The evidence-class section for the Markdown and HTML views (plain text cells)."""
    rows = tuple(
        (
            short_digest(g.candidate_digest) + (" (no change)" if g.no_change else ""),
            ", ".join(g.attempt_ids),
            ", ".join(str(s) for s in g.evidence_states),
            str(g.verifier),
            "none" if g.isolation is None else str(g.isolation),
            ", ".join(g.trust_levels) or "none",
            f"{g.reruns_reproduced}/{g.reruns_launched} reproduced"
            + (", consensus" if g.rerun_consensus else ", no consensus"),
            _class_text(g),
        )
        for g in admission.groups
    )
    return TableSection(
        title="Evidence classes of candidate groups",
        notes=(_SECTION_NOTE, f"Human decision: {admission.human_decision.status}."),
        headers=(
            "Candidate",
            "Attempts",
            "Evidence states",
            "Verifier",
            "Isolation",
            "Trust",
            "Reruns",
            "Class",
        ),
        rows=rows,
        badge_column=7,
        headline=admission_headline(admission),
    )
