"""A backend module that ends its process with os._exit(0) while it is imported."""
import os

os._exit(0)
