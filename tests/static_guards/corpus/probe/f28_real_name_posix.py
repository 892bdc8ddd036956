"""row: real name: posix.system is os.system"""
import posix

posix.system("true")  # expect: KG004
