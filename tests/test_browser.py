"""The demo's HTML report opened in headless Chromium (Debian ``chromium``).

Skipped, with the reason, only where no Chromium binary can be found (CI installs it:
``apt-get install -y chromium``). The page must render the attempt table, the
candidates' diffs and the failed check's output, run no script, and screenshots are
saved as ``results/demo/evidence-700.png`` and ``evidence-1400.png`` (a reviewer's
narrow window and a desktop one; the window is tall enough that the diffs and the
failed check's output are in the picture).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernel.effects.pipeline import PipelineResult, run_pipeline

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "fixtures" / "demo"
SCREENSHOTS = ROOT / "results" / "demo"
# Tall windows: the whole page, diffs and check outputs included, is in the picture.
WINDOWS = {700: 7200, 1400: 4200}
HOSTILE_ID = "<script>document.title='pwned'</script><img src=x onerror=alert(1)>"


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


CHROMIUM = _chromium()
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="no Chromium binary on PATH (install Debian's: apt-get install -y chromium)",
)


def _browse(page: Path, *extra: str, window: tuple[int, int] = (1400, 1100)) -> str:
    """Run headless Chromium on ``page``; return stdout. Its whole process group dies."""
    assert CHROMIUM is not None
    with tempfile.TemporaryDirectory(prefix="kernel-chromium-") as profile:
        argv = [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            f"--user-data-dir={profile}",
            f"--window-size={window[0]},{window[1]}",
            *extra,
            page.as_uri(),
        ]
        proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            cwd=profile,
        )
        try:
            out, _ = proc.communicate(timeout=90)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return out.decode("utf-8", "replace")


@pytest.fixture(scope="module")
def report() -> Iterator[tuple[Path, PipelineResult]]:
    """The demo, plus one attempt with a hostile id, run into a scratch folder."""
    base = Path(tempfile.mkdtemp(prefix="kernel-test-", dir="/var/tmp"))
    try:
        shutil.copytree(DEMO, base / "demo")
        config = base / "demo/config.json"
        text = config.read_text().replace('"attempt-4"', '"' + HOSTILE_ID.replace('"', "") + '"')
        config.write_text(text)
        result = run_pipeline(
            config, base / "results/demo", reruns=1, results_root=base / "results"
        )
        yield base / "results/demo/evidence.html", result
    finally:
        shutil.rmtree(base)


def test_page_renders_the_attempt_table_and_runs_no_script(
    report: tuple[Path, PipelineResult],
) -> None:
    """The DOM after load holds the attempt table (every attempt, a row) and no script."""
    page, result = report
    dom = _browse(page, "--dump-dom")
    assert '<h2 id="attempts">Attempts</h2>' in dom
    for attempt in result.report.attempts:
        if attempt.attempt_id != HOSTILE_ID:
            aid = attempt.attempt_id
            assert f'<td data-label="Attempt"><span class="id" title="{aid}">{aid}</span>' in dom
    # Decision first: the candidate to accept and the evidence classes above the attempts;
    # the demo's right and wrong fixes are no red banner.
    assert dom.index('<h2 id="decision">') < dom.index("Evidence classes of candidate groups")
    assert dom.index("Evidence classes of candidate groups") < dom.index('<h2 id="attempts">')
    assert '<p class="headline go">' in dom
    assert 'class="banner"' not in dom
    assert "Recommendations differ across candidates" in dom
    assert '<h2 id="worker-outputs">Worker outputs</h2>' in dom
    assert '<h2 id="isolation">Isolation and limits</h2>' in dom
    assert "<script" not in dom
    assert "<img" not in dom
    assert "&lt;script&gt;" in dom  # the hostile id is text, not an element
    assert "pwned" not in dom.split("<title>")[1].split("</title>")[0]
    assert "Evidence classes of candidate groups" in dom
    # The reviewer's workspace: the wrong fix's diff and why unit-tests failed.
    assert '<h2 id="candidates">Candidates</h2>' in dom
    assert '<span class="dl">-    ordered = sorted(values)</span>' in dom
    assert "AssertionError" in dom
    assert "FAIL: test_median_even" in dom
    # Regression: the tail showed the runner's JUnit XML stdout, the check's nonce with it.
    assert "nonce" not in dom
    for name in ("patches", "checks"):
        for path in (page.parent / name).iterdir():
            assert f'href="{name}/{path.name}"' in dom


@pytest.mark.parametrize("width", sorted(WINDOWS))
def test_screenshots_at_two_widths(report: tuple[Path, PipelineResult], width: int) -> None:
    """Screenshots at 700 and 1400 px are saved under results/demo/ (look at them: the
    attempt table is stacked cards at 700 px, the diffs and the failed check's output
    are shown below it)."""
    page, _ = report
    shot = SCREENSHOTS / f"evidence-{width}.png"
    shot.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        shot.unlink()
    _browse(page, f"--screenshot={shot}", window=(width, WINDOWS[width]))
    data = shot.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    assert int.from_bytes(data[16:20], "big") == width  # IHDR width: nothing wider
    assert len(data) > 10_000
