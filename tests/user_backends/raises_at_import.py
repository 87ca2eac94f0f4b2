"""A backend module whose import raises."""
raise RuntimeError("planted error while importing")
