"""row: reach-through: import email.utils, then email.utils.os.system"""
import email.utils

email.utils.os.system("true")  # expect: KG004
