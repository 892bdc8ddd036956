"""row: __import__("literal")"""
__import__("subprocess").run(["true"], check=False)  # expect: KG001 KG004
