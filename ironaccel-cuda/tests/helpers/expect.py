"""What the bad-input tests expect of an error: exactly the typed class, naming the operation."""

from __future__ import annotations

from typing import Any

import pytest


def raises_exactly(cls: type, op: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Call `fn`: it must raise exactly `cls` (not a subclass) with `op` as its operation and in its message."""
    with pytest.raises(cls) as info:
        fn(*args, **kwargs)
    assert type(info.value) is cls, repr(info.value)
    assert info.value.op == op and op in str(info.value), (info.value.op, str(info.value))
    return info.value
