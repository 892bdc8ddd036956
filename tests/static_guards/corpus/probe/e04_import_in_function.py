"""row: import inside a function"""


def spawn() -> None:
    import subprocess  # expect: KG001

    subprocess.run(["true"], check=False)  # expect: KG004
