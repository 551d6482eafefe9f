"""cuda.core's device resources (SM and workqueue partitions for green contexts): waiting for issue 15."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import _needs
from ._missing import missing_class

__all__ = ["DeviceResources", "SMResource", "SMResourceOptions", "WorkqueueResource", "WorkqueueResourceOptions"]


@dataclass
class SMResourceOptions:
    count: Any = None
    coscheduled_sm_count: Any = None
    preferred_coscheduled_sm_count: Any = None
    backfill: Any = False


@dataclass
class WorkqueueResourceOptions:
    sharing_scope: Any = None
    concurrency_limit: int | None = None


DeviceResources = missing_class("DeviceResources", _needs.RESOURCES, __name__)
SMResource = missing_class("SMResource", _needs.RESOURCES, __name__)
WorkqueueResource = missing_class("WorkqueueResource", _needs.RESOURCES, __name__)
