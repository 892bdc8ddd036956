"""One module per `kernel` sub-command; each exposes ``register(subparsers)``.

``register`` adds the verb's parser and sets ``handler`` (``(args) -> int``) as its
default. Handlers raise `kernel.errors.KernelError` for unusable input; only
`kernel.effects.cli.main` turns exceptions into messages and exit codes.
"""

__all__: list[str] = []
