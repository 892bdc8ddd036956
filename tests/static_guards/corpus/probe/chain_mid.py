"""Helper (not itself guarded): imports a forbidden module for the transitive row."""
import subprocess

run = subprocess.run
