"""A backend module that kills its process with SIGSEGV while it is imported."""
import os
import signal

os.kill(os.getpid(), signal.SIGSEGV)
