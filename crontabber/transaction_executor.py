"""crontabber's ``TransactionExecutor``: run a function in one transaction."""

from __future__ import annotations

from typing import Any, Callable, Mapping, TypeVar

from .connection_factory import ConnectionFactory

T = TypeVar("T")


class TransactionExecutor:
    """``executor(fn, *args)`` calls ``fn(connection, *args)``, commits and
    returns its result; on any exception it rolls back, drops the connection
    and re-raises."""

    def __init__(self, config: Mapping[str, Any], factory: ConnectionFactory) -> None:
        self.config = config
        self.factory = factory

    def __call__(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        with self.factory() as connection:
            try:
                result = function(connection, *args, **kwargs)
                connection.commit()
                return result
            except BaseException:
                try:
                    connection.rollback()
                finally:
                    self.factory.force_reconnect()
                raise
