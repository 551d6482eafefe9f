"""cuda.core's device resources: SM partitions and workqueues, the inputs of green contexts.

`dev.resources.sm` is the device's SM resource (cuDeviceGetDevResource); `split()`
divides it into groups with cuDevSmResourceSplitByCount, the split this driver
generation (CUDA 13.0) has; `Device.create_context(ContextOptions(resources=[group]))`
makes a green context over a group (ironaccel's `GreenContext`).  A context's or a
stream's `resources` are those the context was provisioned with.  Workqueue resources
exist from driver 13.1 on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._utils.cuda_utils import CUDAError, call, check_or_create_options, driver, guarded, is_sequence

__all__ = ["DeviceResources", "SMResource", "SMResourceOptions", "WorkqueueResource", "WorkqueueResourceOptions"]

CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING = 1
CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION = 915
_GREEN_CTX_DRIVER = 12040
_WORKQUEUE_DRIVER = 13010


def _driver_version() -> int:
    import ironaccel_cuda

    return int(guarded(ironaccel_cuda.driver_version))


def _version_text(v: int) -> str:
    return f"{v // 1000}.{v % 1000 // 10}"


def _check_green_ctx_support() -> None:
    v = _driver_version()
    if v < _GREEN_CTX_DRIVER:
        raise RuntimeError(f"Green context support requires CUDA driver 12.4 or newer (current driver: "
                           f"{_version_text(v)})")


def _check_workqueue_support() -> None:
    v = _driver_version()
    if v < _WORKQUEUE_DRIVER:
        raise RuntimeError(f"WorkqueueResource requires CUDA driver 13.1 or newer (current driver: "
                           f"{_version_text(v)})")
    if not hasattr(driver.CUdevResourceType, "CU_DEV_RESOURCE_TYPE_WORKQUEUE_CONFIG"):
        raise RuntimeError("WorkqueueResource requires cuda.bindings 13.1 or newer")


@dataclass
class SMResourceOptions:
    """`SMResource.split` options: each a scalar (one group) or a Sequence (one entry per group, as `count`).

    `count` None is discovery (the smallest partition); `backfill` relaxes SM
    co-scheduling so finer partitions fit (CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING).
    """

    count: Any = None
    coscheduled_sm_count: Any = None
    preferred_coscheduled_sm_count: Any = None
    backfill: Any = False


@dataclass
class WorkqueueResourceOptions:
    """`WorkqueueResource.configure` options: `sharing_scope` ("device_ctx" or "green_ctx_balanced") and
    `concurrency_limit` (>= 1)."""

    sharing_scope: Any = None
    concurrency_limit: int | None = None

    def __post_init__(self) -> None:
        from .typing import WorkqueueSharingScopeType

        valid = sorted(m.value for m in WorkqueueSharingScopeType)
        if self.sharing_scope is not None and self.sharing_scope not in valid:
            raise ValueError(f"{self.sharing_scope!r} is not a valid WorkqueueSharingScopeType. Must be None, "
                             + ", ".join(repr(v) for v in valid[:-1]) + f" or {valid[-1]!r}")
        if self.concurrency_limit is not None and self.concurrency_limit < 1:
            raise ValueError(f"concurrency_limit must be >= 1, got {self.concurrency_limit}")


def _group_count(options: SMResourceOptions) -> int:
    count = options.count
    if count is None or isinstance(count, int):
        n_groups, scalar = 1, True
    elif is_sequence(count):
        n_groups, scalar = len(count), False
        if n_groups == 0:
            raise ValueError("count sequence must not be empty")
    else:
        raise TypeError(f"count must be int, Sequence, or None, got {type(count)}")
    for name in ("coscheduled_sm_count", "preferred_coscheduled_sm_count", "backfill"):
        value = getattr(options, name)
        if scalar and is_sequence(value):
            raise ValueError(f"{name} is a Sequence but count is scalar; count must be a Sequence to specify "
                             "multiple groups")
        if not scalar and is_sequence(value) and len(value) != n_groups:
            raise ValueError(f"{name} has length {len(value)}, expected {n_groups} (must match count)")
    return n_groups


def _broadcast(value: Any, n_groups: int) -> list[Any]:
    return list(value) if is_sequence(value) else [value] * n_groups


class SMResource:
    """An SM resource: a device's or context's SMs, or one group (or the remainder) of a split."""

    __slots__ = ("_res", "_sm_count", "_min_partition_size", "_coscheduled_alignment", "_flags", "_is_usable")
    _res: Any
    _sm_count: int
    _min_partition_size: int
    _coscheduled_alignment: int
    _flags: int
    _is_usable: bool

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("SMResource cannot be instantiated directly. Use dev.resources.sm or SMResource.split().")

    @classmethod
    def _from_dev_resource(cls, res: Any, parent: SMResource | None = None, usable: bool = True) -> SMResource:
        self = object.__new__(cls)
        self._res = res
        self._sm_count = int(res.sm.smCount)
        self._min_partition_size = int(res.sm.minSmPartitionSize) or (parent._min_partition_size if parent else 0)
        self._coscheduled_alignment = int(res.sm.smCoscheduledAlignment) or (
            parent._coscheduled_alignment if parent else 0)
        self._flags = int(getattr(res.sm, "flags", 0))  # CUDA 13.1 headers on
        self._is_usable = usable
        return self

    @property
    def handle(self) -> int:
        """The address of the underlying `CUdevResource`."""
        return int(self._res.getPtr())

    @property
    def sm_count(self) -> int:
        return self._sm_count

    @property
    def min_partition_size(self) -> int:
        """The fewest SMs a partition of this resource can have."""
        return self._min_partition_size

    @property
    def coscheduled_alignment(self) -> int:
        """How many SMs of this resource are guaranteed to be co-scheduled (the partition alignment)."""
        return self._coscheduled_alignment

    @property
    def flags(self) -> int:
        return self._flags

    def split(self, options: Any, *, dry_run: bool = False) -> tuple[list[SMResource], SMResource]:
        """`(groups, remainder)`: disjoint groups of this resource's SMs (cuDevSmResourceSplitByCount).

        All groups get the same count on this driver's split; a request the device
        cannot meet in full is CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION.  With
        `dry_run` the groups only describe the split and cannot make a context.
        """
        opts = check_or_create_options(SMResourceOptions, options, "SM resource options")
        n_groups = _group_count(opts)
        _check_green_ctx_support()
        if opts.coscheduled_sm_count is not None:
            raise RuntimeError("SMResourceOptions.coscheduled_sm_count requires the CUDA 13.1 structured SM split API")
        if opts.preferred_coscheduled_sm_count is not None:
            raise RuntimeError("SMResourceOptions.preferred_coscheduled_sm_count requires the CUDA 13.1 structured "
                               "SM split API")
        counts = _broadcast(opts.count, n_groups)
        backfills = [bool(b) for b in _broadcast(opts.backfill, n_groups)]
        if any(c != counts[0] for c in counts[1:]) or any(b != backfills[0] for b in backfills[1:]):
            raise RuntimeError("this driver's SM split (cuDevSmResourceSplitByCount) only supports the same count "
                               "and backfill for every group; use CUDA 13.1 or newer for per-group values")
        first = counts[0]
        if first is not None and first < 0:
            raise ValueError(f"count must be non-negative, got {first}")
        min_count = 0 if first is None else int(first)
        if min_count > self._sm_count:
            raise CUDAError(f"CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION: a group of {min_count} SMs is larger than "
                            f"this resource ({self._sm_count} SMs)", op="cuDevSmResourceSplitByCount",
                            code=CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION)
        flags = CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING if backfills[0] else 0
        result, made, remaining = call("cuDevSmResourceSplitByCount", n_groups, self._res, flags, min_count)
        made = int(made)
        if made < n_groups:
            raise CUDAError(f"CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION: only {made} of {n_groups} groups of at least "
                            f"{min_count} SMs fit in {self._sm_count} SMs (after rounding to the partition "
                            "granularity)", op="cuDevSmResourceSplitByCount",
                            code=CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION)
        usable = not dry_run
        groups = [SMResource._from_dev_resource(r, self, usable) for r in list(result)[:made]]
        return groups, SMResource._from_dev_resource(remaining, self, usable)

    def __repr__(self) -> str:
        return f"<SMResource sm_count={self._sm_count}>"


class WorkqueueResource:
    """A device's or green context's workqueue (its config and the workqueue resource under one name)."""

    __slots__ = ("_wq_config", "_wq")
    _wq_config: Any
    _wq: Any

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("WorkqueueResource cannot be instantiated directly. Use dev.resources.workqueue.")

    @classmethod
    def _from_dev_resources(cls, wq_config: Any, wq: Any) -> WorkqueueResource:
        self = object.__new__(cls)
        self._wq_config = wq_config
        self._wq = wq
        return self

    @property
    def handle(self) -> int:
        """The address of the underlying workqueue-config `CUdevResource`."""
        return int(self._wq_config.getPtr())

    @property
    def sharing_scope(self) -> Any:
        from .typing import WorkqueueSharingScopeType

        scope = int(self._wq_config.wqConfig.sharingScope)
        if scope == int(driver.CUdevWorkqueueConfigScope.CU_WORKQUEUE_SCOPE_DEVICE_CTX):
            return WorkqueueSharingScopeType.DEVICE_CTX
        if scope == int(driver.CUdevWorkqueueConfigScope.CU_WORKQUEUE_SCOPE_GREEN_CTX_BALANCED):
            return WorkqueueSharingScopeType.GREEN_CTX_BALANCED
        raise RuntimeError(f"Unknown sharing scope enum value: {scope}")

    @property
    def concurrency_limit(self) -> int:
        return int(self._wq_config.wqConfig.wqConcurrencyLimit)

    @property
    def device(self) -> Any:
        from ._device import Device

        return Device(int(self._wq_config.wqConfig.device))

    def configure(self, options: Any) -> None:
        """Set the sharing scope and concurrency limit used by contexts made from this resource."""
        opts = check_or_create_options(WorkqueueResourceOptions, options, "Workqueue resource options")
        _check_green_ctx_support()
        _check_workqueue_support()
        config = self._wq_config.wqConfig
        if opts.concurrency_limit is not None:
            config.wqConcurrencyLimit = int(opts.concurrency_limit)
        if opts.sharing_scope == "device_ctx":
            config.sharingScope = driver.CUdevWorkqueueConfigScope.CU_WORKQUEUE_SCOPE_DEVICE_CTX
        elif opts.sharing_scope == "green_ctx_balanced":
            config.sharingScope = driver.CUdevWorkqueueConfigScope.CU_WORKQUEUE_SCOPE_GREEN_CTX_BALANCED
        return None


class DeviceResources:
    """The resources of a device (`dev.resources`) or of one context (`ctx.resources`, `stream.resources`)."""

    __slots__ = ("_device_id", "_context")
    _device_id: int
    _context: Any

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("DeviceResources cannot be instantiated directly. Use dev.resources or ctx.resources.")

    @classmethod
    def _init(cls, device_id: int, context: Any = None) -> DeviceResources:
        self = object.__new__(cls)
        self._device_id = device_id
        self._context = context
        return self

    def _query(self, kind: str) -> Any:
        rtype = getattr(driver.CUdevResourceType, f"CU_DEV_RESOURCE_TYPE_{kind}")
        ctx = self._context
        if ctx is None:
            from ._device import Device

            return call("cuDeviceGetDevResource", Device(self._device_id)._state.cudev, rtype)
        if ctx.is_closed:
            raise RuntimeError("Cannot query resources on a closed context")
        green = ctx._green
        if green is not None:
            green._check("cuGreenCtxGetDevResource")
            return call("cuGreenCtxGetDevResource", green._green, rtype)
        return call("cuCtxGetDevResource", ctx.handle, rtype)

    @property
    def sm(self) -> SMResource:
        """The SMs of this device, or those provisioned for this context."""
        _check_green_ctx_support()
        return SMResource._from_dev_resource(self._query("SM"))

    @property
    def workqueue(self) -> WorkqueueResource:
        """The workqueue of this device or context (driver 13.1 and newer)."""
        _check_green_ctx_support()
        _check_workqueue_support()
        return WorkqueueResource._from_dev_resources(self._query("WORKQUEUE_CONFIG"), self._query("WORKQUEUE"))
