"""Rendering a `GuardReport` as text, JSON or SARIF 2.1.0.

Rules this module enforces:

- text is one ``path:line:col: CODE message`` line per finding, sorted by path, line
  and column (the report is already sorted), then a one-line summary on its own;
- JSON is an object with ``version``, ``files_checked``, ``files_cached`` and
  ``violations`` (see `Violation.to_dict`);
- SARIF is a single run of a ``kernel-guard`` driver whose rules are the
  `ViolationCode` members; columns are declared ``unicodeCodePoints`` (they count
  characters); a transitive finding carries its chain as ``relatedLocations``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernel.guard.model import GuardReport, ViolationCode

# `pathlib` and `urllib.parse` are imported by the SARIF and GitHub renderers that use
# them: a text or JSON run loads neither (with `ipaddress`, about 3 ms of a cold run).
if TYPE_CHECKING:
    from pathlib import Path

__all__ = [
    "FORMATS",
    "render",
    "render_error",
    "render_github",
    "render_json",
    "render_sarif",
    "render_text",
]

FORMATS = ("text", "json", "sarif", "github")
"""Accepted values of ``--format``."""

_SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def _docs() -> Path | None:
    """docs/guard.md of the checkout or sdist this guard runs from (an installed wheel
    has no docs: then SARIF carries the help text without a ``helpUri``)."""
    from pathlib import Path

    candidate = Path(__file__).resolve().parents[3] / "docs" / "guard.md"
    return candidate if candidate.is_file() else None


def _dumps(doc: object) -> str:
    """A JSON document as every format here writes it: sorted keys, two-space indent,
    text as it is (no ``\\u`` escapes), one final newline."""
    import json  # here: a text run (the common one) loads no JSON encoder

    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _anchor(code: ViolationCode) -> str:
    """GitHub's heading anchor of the code's section in docs/guard.md."""
    return f"{code.value}-{code.slug}".lower()


def render_text(report: GuardReport) -> str:
    """``path:line:col: CODE message`` lines and a summary line."""
    lines = [
        f"{v.path}:{v.line}:{v.column}: {v.code.value} {v.message} [{v.rule}]"
        if v.rule
        else f"{v.path}:{v.line}:{v.column}: {v.code.value} {v.message}"
        for v in report.violations
    ]
    count = len(report.violations)
    lines.append(
        f"{count} finding{'s' if count != 1 else ''} in {report.files_checked} files "
        f"({report.files_cached} from cache)"
    )
    return "\n".join(lines) + "\n"


def render_json(report: GuardReport, version: str) -> str:
    """The report as a JSON document (sorted keys, two-space indent)."""
    doc = {
        "version": version,
        "files_checked": report.files_checked,
        "files_cached": report.files_cached,
        "violations": [v.to_dict() for v in report.violations],
    }
    return _dumps(doc)


def _uri(path: str) -> str:
    """A relative path as a percent-encoded URI reference (RFC 3986): spaces, ``#``,
    ``%`` and non-ASCII characters are encoded, ``/`` separates segments."""
    from pathlib import PurePath
    from urllib.parse import quote

    return quote(PurePath(path).as_posix(), safe="/")


def _location(path: str) -> dict[str, object]:
    from pathlib import PurePath

    pure = PurePath(path)
    if pure.is_absolute():
        return {"uri": pure.as_uri()}
    return {"uri": _uri(path), "uriBaseId": "SRCROOT"}


def render_sarif(report: GuardReport, version: str, root: Path | str | None = None) -> str:
    """The report as a SARIF 2.1.0 log with one run; ``SRCROOT`` is the project root
    (the working directory when not given), which every relative path is under."""
    from pathlib import Path

    codes = list(ViolationCode)
    index = {code: i for i, code in enumerate(codes)}
    results = []
    for v in report.violations:
        result: dict[str, object] = {
            "ruleId": v.code.value,
            "ruleIndex": index[v.code],
            "level": "error",
            "message": {"text": f"{v.message} [{v.rule}]" if v.rule else v.message},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": _location(v.path),
                        "region": {"startLine": v.line, "startColumn": v.column},
                    }
                }
            ],
        }
        if v.rule:
            result["properties"] = {"guardRule": v.rule}
        if v.chain:
            result["relatedLocations"] = [
                {
                    "id": i,
                    "message": {"text": f"{link.module} imports {link.imports}"},
                    "physicalLocation": {
                        "artifactLocation": _location(link.path),
                        "region": {"startLine": link.line},
                    },
                }
                for i, link in enumerate(v.chain)
            ]
        results.append(result)
    docs = _docs()
    driver: dict[str, object] = {
        "name": "kernel-guard",
        "version": version,
        "rules": [_sarif_rule(code, docs) for code in codes],
    }
    if docs is not None:
        driver["informationUri"] = docs.as_uri()
    doc = {
        "$schema": _SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": driver},
                "originalUriBaseIds": {
                    "SRCROOT": {"uri": Path(root or Path.cwd()).resolve().as_uri() + "/"}
                },
                "columnKind": "unicodeCodePoints",
                "results": results,
            }
        ],
    }
    return _dumps(doc)


def _gh_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _gh_property(text: str) -> str:
    return _gh_data(text).replace(":", "%3A").replace(",", "%2C")


def render_github(report: GuardReport) -> str:
    """GitHub Actions workflow commands: one ``::error`` annotation per finding."""
    lines = [
        f"::error file={_gh_property(_uri(v.path))},line={v.line},col={v.column},"
        f"title={_gh_property(f'{v.code.value} {v.code.slug}')}::"
        + _gh_data(f"{v.message} [{v.rule}]" if v.rule else v.message)
        for v in report.violations
    ]
    count = len(report.violations)
    lines.append(f"{count} finding{'s' if count != 1 else ''} in {report.files_checked} files")
    return "\n".join(lines) + "\n"


def render_error(message: str, fmt: str, version: str) -> str:
    """An unusable configuration, in the shape of ``fmt`` (so no format looks green)."""
    if fmt == "json":
        doc: dict[str, object] = {"version": version, "error": message, "violations": None}
        return _dumps(doc)
    if fmt == "sarif":
        run: dict[str, object] = {
            "tool": {"driver": {"name": "kernel-guard", "version": version}},
            "invocations": [
                {
                    "executionSuccessful": False,
                    "toolConfigurationNotifications": [
                        {"level": "error", "message": {"text": message}}
                    ],
                }
            ],
            "results": [],
        }
        sarif: dict[str, object] = {"$schema": _SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}
        return _dumps(sarif)
    if fmt == "github":
        return f"::error title=kernel guard configuration::{_gh_data(message)}\n"
    return f"error: {message}\n"


def _sarif_rule(code: ViolationCode, docs: Path | None) -> dict[str, object]:
    text = code.help
    rule: dict[str, object] = {
        "id": code.value,
        "name": code.slug,
        "shortDescription": {"text": code.slug.replace("-", " ")},
        "fullDescription": {"text": text},
        "help": {"text": text, "markdown": f"**{code.value} {code.slug}**: {text}"},
        "defaultConfiguration": {"level": "error"},
    }
    if docs is not None:
        rule["helpUri"] = f"{docs.as_uri()}#{_anchor(code)}"
    return rule


def render(report: GuardReport, fmt: str, version: str, root: Path | str | None = None) -> str:
    """Dispatch on ``fmt`` (one of `FORMATS`); ``root``: the project root that relative
    paths are under (SARIF's ``SRCROOT``; default the working directory).

    Raises:
        ValueError: unknown format.
    """
    if fmt == "text":
        return render_text(report)
    if fmt == "json":
        return render_json(report, version)
    if fmt == "sarif":
        return render_sarif(report, version, root)
    if fmt == "github":
        return render_github(report)
    raise ValueError(f"unknown format {fmt!r} (expected one of {', '.join(FORMATS)})")
