# The selected hot path has the interface of the pure-Python reference (see _hot.py / _hotpy.py).
from ._hotpy import *  # noqa: F403
from ._hotpy import BufCore as BufCore
from ._hotpy import DeviceCore as DeviceCore
from ._hotpy import EventCore as EventCore
from ._hotpy import FunctionCore as FunctionCore
from ._hotpy import PoolCore as PoolCore
from ._hotpy import StreamCore as StreamCore

DESCRIPTION: str
