"""The rerun lane's store under its old name: :class:`crontabber.reruns.store.RerunStore`
(the reruns' room, :mod:`crontabber.reruns`). Kept only for :mod:`crontabber.runner`'s two
imports of it; goes with them."""

from __future__ import annotations

from .reruns.store import RerunStore

__all__ = ["RerunStore"]
