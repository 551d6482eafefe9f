"""ironaccel backend: OpenGL 4.3 compute on moderngl with headless EGL.

Importing this package loads no vendor library; the backend loads it on probe."""

__version__ = "0.1.0"
