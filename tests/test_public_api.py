"""The public API is exactly what kernel.__all__ says, and every module declares __all__."""

from __future__ import annotations

import importlib
import importlib.resources
import pkgutil

import kernel

EXPECTED = {
    "BudgetCharge",
    "CanonicalizationError",
    "ConfigError",
    "EffectError",
    "Identity",
    "KernelError",
    "Record",
    "RecordError",
    "Refusal",
    "RefusedError",
    "SourceSpan",
    "canonical_json",
    "compute_id",
    "identity_payload",
    "seal",
    "sha256_bytes",
    "sha256_hex",
    "unwrap",
}


def test_exports_are_pinned() -> None:
    """kernel.__all__ is exactly the pinned list, and each name resolves."""
    assert set(kernel.__all__) == EXPECTED
    for name in kernel.__all__:
        assert getattr(kernel, name) is not None


def test_every_module_declares_all() -> None:
    """Every importable kernel module sets __all__, and each listed name exists."""
    for info in pkgutil.walk_packages(kernel.__path__, "kernel."):
        module = importlib.import_module(info.name)
        assert hasattr(module, "__all__"), info.name
        for name in module.__all__:
            assert hasattr(module, name), f"{info.name}.{name}"


def test_py_typed_ships() -> None:
    """The package carries its py.typed marker."""
    assert importlib.resources.files("kernel").joinpath("py.typed").is_file()
