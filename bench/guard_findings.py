"""Are `kernel guard`'s findings unchanged? Writes them, or compares them byte for byte.

A speed change to the guard must not change what it finds. This runs ``kernel guard``
in fresh processes, cold (``--no-cache``) and with a cold per-file cache beside a kept
effect map, with one job and with two, in the text and JSON formats, over the bench's
own configurations (`bench/guard.py`): the standard library with the stdlib bans, and
Django 5.0 (from ``--django-sdist``, else skipped) with the Django rule. Every output
of one configuration must be the same; ``--write DIR`` keeps them, ``--compare DIR``
compares them with a kept copy (the JSON's ``version`` field, a hash of the guard's
own source, is left out: it changes with every edit).

Usage: ``python bench/guard_findings.py (--write DIR | --compare DIR)
[--django-sdist Django-5.0.tar.gz]``; exit 0 when everything matched.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.guard import _ENV, BIN, STDLIB_SKIP, _django_tree, _policy_file


def _outputs(
    src: Path, policy: Path, exclude: tuple[str, ...], work: Path
) -> dict[str, bytes] | str:
    """Each run's output, by name; or why the runs disagree with each other."""
    base = [str(BIN / "kernel"), "guard", "--config", str(policy), "--src", str(src)]
    base += [f"--exclude={e}" for e in exclude]
    got: dict[str, bytes] = {}
    cache = work / "cache"
    runs = [  # every way a run can go: in this process or forked, cached or not
        ("json", "1", ["--no-cache"]),
        ("json", "2", ["--cache-dir", str(cache)]),
        ("text", "1", ["--cache-dir", str(cache)]),
        ("text", "2", ["--no-cache"]),
    ]
    for fmt, jobs, extra in runs:
        for stale in cache.glob("*.marshal"):
            if not stale.name.startswith("effects-"):
                stale.unlink()  # a cold run: only the effect map is kept
        argv = [*base, "--format", fmt, "--jobs", jobs, *extra]
        out = subprocess.run(argv, cwd=work, capture_output=True, check=False, env=_ENV)
        if out.returncode not in (0, 1):
            return f"{' '.join(argv)}: exit {out.returncode}: {out.stderr.decode()}"
        body = out.stdout
        if fmt == "json":
            data = json.loads(body)
            data.pop("version", None)
            data.pop("files_cached", None)
            body = json.dumps(data, indent=2, sort_keys=True).encode()
        else:  # the summary line counts files served from the cache
            body = body.rsplit(b" (", 1)[0] if body.endswith(b"cache)\n") else body
        name = f"{fmt}-{jobs}"
        if fmt in got and got[fmt] != body:
            return f"{name} ({' '.join(extra)}) differs from the other {fmt} run"
        got[fmt] = body
    return got


def main() -> int:
    """Write or compare the findings of every configuration."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", type=Path, help="keep the findings in this folder")
    mode.add_argument("--compare", type=Path, help="compare with the findings kept here")
    parser.add_argument("--django-sdist", type=Path, help="Django-5.0.tar.gz")
    args = parser.parse_args()
    failures = 0
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        stdlib = Path(sysconfig.get_paths()["stdlib"])
        configs: list[tuple[str, Path, Path, tuple[str, ...]]] = [
            ("stdlib", stdlib, _policy_file(tmp), STDLIB_SKIP)
        ]
        if args.django_sdist is not None:
            root = _django_tree(tmp, args.django_sdist)
            assert root is not None, "no Django package in the sdist"
            policy = tmp / "django-policy.md"
            rule = [
                "```guard", "[[rules]]", 'name = "bans"', 'modules = ["django", "django.*"]',
                'forbid-imports = ["subprocess", "socket"]',
                'forbid-calls = ["os.system", "os.environ", "builtins.eval", "builtins.exec", '
                '"datetime.datetime.now"]', "```", "",
            ]  # fmt: skip
            policy.write_text("\n".join(rule), encoding="utf-8")
            configs.append(("django", root, policy, ()))
        for name, src, policy, exclude in configs:
            work = tmp / f"work-{name}"
            work.mkdir()
            got = _outputs(src, policy, exclude, work)
            if isinstance(got, str):
                print(f"{name}: {got}")
                failures += 1
                continue
            for fmt, body in got.items():
                kept = (args.write or args.compare) / f"{name}.{fmt}"
                if args.write is not None:
                    kept.parent.mkdir(parents=True, exist_ok=True)
                    kept.write_bytes(body)
                    print(f"{name}.{fmt}: written ({len(body)} bytes)")
                elif not kept.exists() or kept.read_bytes() != body:
                    print(f"{name}.{fmt}: DIFFERS from {kept}")
                    (kept.parent / f"{name}.{fmt}.new").write_bytes(body)
                    failures += 1
                else:
                    print(f"{name}.{fmt}: identical ({len(body)} bytes)")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
