"""The Khronos validation layer and a debug-utils messenger that keeps its messages.

`IRONACCEL_VULKAN_VALIDATION=1` (or `Backend(validation=True)`) enables
``VK_LAYER_KHRONOS_validation`` on every instance the backend creates.  Whenever
``VK_EXT_debug_utils`` is available a messenger collects warnings and errors,
whether the layer was enabled here or through ``VK_INSTANCE_LAYERS``: each
instance keeps its own `MessageLog`, and every error also lands in the
process-wide log that `errors()` returns, which the test suite checks after each
test so that any validation error fails it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "LAYER",
    "VALIDATION_ENV",
    "Message",
    "MessageLog",
    "requested",
    "errors",
    "clear_errors",
    "make_callback",
]

LAYER = "VK_LAYER_KHRONOS_validation"
VALIDATION_ENV = "IRONACCEL_VULKAN_VALIDATION"
DEBUG_UTILS = "VK_EXT_debug_utils"

SEVERITY_VERBOSE = 0x1
SEVERITY_INFO = 0x10
SEVERITY_WARNING = 0x100
SEVERITY_ERROR = 0x1000
TYPE_GENERAL = 0x1
TYPE_VALIDATION = 0x2
TYPE_PERFORMANCE = 0x4


@dataclass(frozen=True)
class Message:
    """One debug-utils message: severity bit, type bits, VUID (or id name) and text."""

    severity: int
    types: int
    id_name: str
    text: str

    @property
    def is_error(self) -> bool:
        """Whether the message has error severity (and so fails the test that caused it)."""
        return bool(self.severity & SEVERITY_ERROR)

    def __str__(self) -> str:
        level = "error" if self.is_error else "warning" if self.severity & SEVERITY_WARNING else "info"
        return f"[{level}] {self.id_name}: {self.text}" if self.id_name else f"[{level}] {self.text}"


class MessageLog:
    """Messages of one instance, in arrival order; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._messages: list[Message] = []

    def add(self, message: Message) -> None:
        """Keep `message` (an error also goes to the process-wide log that `errors()` returns)."""
        with self._lock:
            self._messages.append(message)
        if message.is_error:
            with _global_lock:
                _global_errors.append(message)

    def mark(self) -> int:
        """A position to read new messages from, with `since`."""
        return len(self._messages)

    def since(self, mark: int) -> list[Message]:
        """The messages that arrived after `mark` (a position from `mark()`)."""
        with self._lock:
            return list(self._messages[mark:])

    def errors(self) -> list[Message]:
        """The error messages of this instance so far."""
        with self._lock:
            return [m for m in self._messages if m.is_error]

    def __len__(self) -> int:
        return len(self._messages)


_global_lock = threading.Lock()
_global_errors: list[Message] = []


def errors() -> list[Message]:
    """Every error message any instance of this process has received (until `clear_errors`)."""
    with _global_lock:
        return list(_global_errors)


def clear_errors() -> None:
    """Forget the validation errors recorded so far (every device's), so the next check starts clean."""
    with _global_lock:
        _global_errors.clear()


def requested(explicit: bool | None = None) -> bool:
    """Whether to enable the validation layer: `explicit`, else IRONACCEL_VULKAN_VALIDATION."""
    if explicit is not None:
        return explicit
    return os.environ.get(VALIDATION_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def make_callback(ffi: Any) -> Callable[..., int]:
    """A cffi PFN_vkDebugUtilsMessengerCallbackEXT that appends to the MessageLog in pUserData."""

    @ffi.callback("PFN_vkDebugUtilsMessengerCallbackEXT")
    def _on_message(severity: int, types: int, data: Any, user: Any) -> int:
        try:
            log: MessageLog = ffi.from_handle(user)
            id_name = ffi.string(data.pMessageIdName).decode(errors="replace") if data.pMessageIdName else ""
            text = ffi.string(data.pMessage).decode(errors="replace") if data.pMessage else ""
            log.add(Message(int(severity), int(types), id_name, text))
        except Exception:
            pass
        return 0  # VK_FALSE: do not abort the call (the layer skips invalid calls itself)

    return _on_message
