"""Kept for the modules that still import the clock seam from here; it is public in
:mod:`acp_client.clock` (import it from there)."""

from .clock import Clock, SystemClock, TimerHandle

__all__ = ["Clock", "SystemClock", "TimerHandle"]
