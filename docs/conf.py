"""Sphinx configuration: the API reference, built from the docstrings (``make docs``)."""

from __future__ import annotations

import kernel

project = "kernel (evidence-kernel)"
author = "the kernel maintainers"
release = version = kernel.__version__
extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon"]
# `name` in a docstring is a cross-reference (to the API when it resolves, plain text
# otherwise: docstrings name fields and parameters the same way).
default_role = "py:obj"
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
# Each object is documented once, where it is defined: a module's ``__all__`` may
# re-export another's name (``kernel.corroboration.consensus.Isolation``), so it is not followed.
autodoc_default_options = {"members": True, "show-inheritance": True, "ignore-module-all": True}
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_attr_annotations = True
exclude_patterns = ["_build", "adr", "examples", "layout.md", "*.md"]
html_theme = "alabaster"
html_title = f"kernel {release}"

