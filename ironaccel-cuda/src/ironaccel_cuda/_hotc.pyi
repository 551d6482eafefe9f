# The compiled hot path implements the contract of _hotpy (see its docstring).
from ._hotpy import *  # noqa: F403

DESCRIPTION: str
