"""The effect shell: the only part of `kernel` that touches files, processes,
clocks, randomness or the environment. The pure core never imports it."""

__all__: list[str] = []
