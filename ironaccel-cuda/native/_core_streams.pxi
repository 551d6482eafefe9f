# StreamCore and EventCore: the hot methods of Stream and Event (stream.py / event.py add the cold ones).

cdef object _EVENT_TYPE = None


def set_event_type(event):
    """The EventCore subclass (event.Event) that DeviceCore.create_event returns."""
    global _EVENT_TYPE
    if not issubclass(event, EventCore):
        raise TypeError("set_event_type wants a subclass of EventCore")
    _EVENT_TYPE = event


cdef class StreamCore:
    """Stream's hot methods.  Cold helpers of the subclass: `_closed_error(op)`, `_bad_event(op, event)`."""

    cdef uintptr_t _hv
    cdef bint _isclosed
    cdef public int _ordinal
    cdef object __weakref__

    def __cinit__(self):
        self._isclosed = True

    @property
    def _h(self):
        return CLOSED if self._isclosed else PyLong_FromUnsignedLongLong(self._hv)

    @_h.setter
    def _h(self, value):
        if value is CLOSED:
            self._isclosed = True
        else:
            self._hv = <uintptr_t>int(value)
            self._isclosed = False

    def synchronize(self):
        """Wait until all work queued on this stream has finished."""
        if self._isclosed:
            raise self._closed_error("cuStreamSynchronize")
        _stream_sync(self._hv)

    def query(self):
        """True when all work queued on this stream has finished."""
        if self._isclosed:
            raise self._closed_error("cuStreamQuery")
        return _stream_query(self._hv) == 1

    def wait(self, event):
        """Make later work on this stream wait until `event` has completed."""
        if self._isclosed or not isinstance(event, EventCore) or (<EventCore>event)._isclosed:
            raise self._bad_event("cuStreamWaitEvent", event)
        _stream_wait(self._hv, (<EventCore>event)._hv)

    def record(self, event=None):
        """Record `event` (or a new timing-off event) here; returns it."""
        if event is None:
            event = self.device.create_event()
        if self._isclosed or not isinstance(event, EventCore) or (<EventCore>event)._isclosed:
            raise self._bad_event("cuEventRecord", event)
        _event_record((<EventCore>event)._hv, self._hv)
        return event


cdef class EventCore:
    """Event's hot methods.  Cold helpers of the subclass: `_bad(op, stream=None)`, `_rebind(exc)`."""

    cdef uintptr_t _hv
    cdef bint _isclosed
    cdef public int _ordinal
    cdef public object _default
    cdef public object device
    cdef public object timing
    cdef object __weakref__

    def __cinit__(self):
        self._isclosed = True

    def __dealloc__(self):
        if not self._isclosed:
            self._isclosed = True
            cuEventDestroy(<CUevent>self._hv)  # a forgotten event: destroyed, errors ignored

    @property
    def _h(self):
        return CLOSED if self._isclosed else PyLong_FromUnsignedLongLong(self._hv)

    @_h.setter
    def _h(self, value):
        if value is CLOSED:
            self._isclosed = True
        else:
            self._hv = <uintptr_t>int(value)
            self._isclosed = False

    @classmethod
    def _make(cls, h, device, timing):
        """An event object over handle `h` (an event this object now owns: IPC imports, ...)."""
        cdef EventCore e = EventCore.__new__(cls)
        e._hv = <uintptr_t>int(h)
        e._isclosed = False
        e.device = device
        e._ordinal = device.ordinal
        e.timing = timing
        e._default = device._state.default_stream
        return e

    def record(self, stream=None):
        """Record this event on `stream` (default: the device's default stream)."""
        s = self._default if stream is None else stream
        if self._isclosed or not isinstance(s, StreamCore) or (<StreamCore>s)._isclosed:
            raise self._bad("cuEventRecord", s)
        _event_record(self._hv, (<StreamCore>s)._hv)

    def synchronize(self):
        """Wait until the work before the last record has completed."""
        if self._isclosed:
            raise self._bad("cuEventSynchronize")
        try:
            _event_sync(self._hv)
        except _errors.InvalidState as exc:
            self._rebind(exc)
            _event_sync(self._hv)

    def query(self):
        """True when the work before the last record has completed."""
        if self._isclosed:
            raise self._bad("cuEventQuery")
        try:
            return _event_query(self._hv) == 1
        except _errors.InvalidState as exc:
            self._rebind(exc)
            return _event_query(self._hv) == 1

    def close(self):
        """Destroy the event (pending work still completes).  Idempotent."""
        if self._isclosed:
            return
        self._isclosed = True
        _event_destroy(self._hv)


# -- host functions (hostfn.py holds the bookkeeping) --------------------------------------------

cdef void _host_once(void* data) noexcept nogil:
    """The driver's thread runs an eager host function: call entry._run(), then drop the launch's reference."""
    with gil:
        entry = <object>data
        try:
            entry._run()
        except BaseException:
            pass  # _run reports its own failures; nothing may leave a driver callback
        finally:
            Py_DECREF(entry)


def launch_host_func(uintptr_t s, entry):
    """cuLaunchHostFunc of `entry._run()` on stream `s`, the entry kept alive until it ran.

    Returns False (and launches nothing) when `s` is capturing: a captured host function can run many times,
    so hostfn.py keeps it with its graph instead.
    """
    global _host_fn_queued
    cdef CUstreamCaptureStatus status = 0
    cdef int err
    while True:
        err = cuStreamIsCapturing(<CUstream>s, &status)
        if err == 0:
            break
        _again(err, IA_cuStreamIsCapturing, s, True)
    if status != 0:
        return False
    Py_INCREF(entry)
    while True:
        err = cuLaunchHostFunc(<CUstream>s, _host_once, <void*>entry)
        if err == 0:
            _host_fn_queued = True  # the next wait takes cuStreamSynchronize (see _core_driver.pxi)
            return True
        try:
            _again(err, IA_cuLaunchHostFunc, s, True)
        except BaseException:
            Py_DECREF(entry)
            raise
