"""crontabber's class decorators, for Python 3.

- ``@as_backfill_cron_app``: ``run(self, date)`` once per missed interval.
- ``@using_postgres()`` / ``@with_postgres_transactions()``: the job gets
  ``self.database_connection_factory`` and ``self.database_transaction_executor``
  and the options ``crontabber.class-X.database.{host,port,dbname,user,password,
  target_session_attrs,dsn}`` (defaults from ``resource.postgresql``).
- ``@with_postgres_connection_as_argument()``: ``run(self, connection[, date])``;
  nothing is committed for the job (as in crontabber: commit yourself).
- ``@with_single_postgres_transaction()`` / ``@as_single_postgres_transaction()``:
  ``run(self, connection[, date])`` in one transaction, committed on return,
  rolled back on an exception (which still fails the job).
- ``@with_subprocess``: ``self.run_process(command, input=None)``.

Decorators copy the class's ``required_config`` and never change a parent's.
"""

from __future__ import annotations

import functools
import importlib

from .base import BaseCronApp
from .config.database import DATABASE_OPTIONS
from .config.options import Namespace

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, TypeVar

    C = TypeVar("C", bound=type)


DEFAULT_RESOURCE = "crontabber.connection_factory.ConnectionFactory"
DEFAULT_EXECUTOR = "crontabber.transaction_executor.TransactionExecutor"


def as_backfill_cron_app(cls: C) -> C:
    """Make ``main`` run ``run(date)`` once per interval missed since the last success."""

    def main(self: BaseCronApp, function: Callable[..., Any] | None = None) -> Any:
        return BaseCronApp.main(self, function=function, once=False)

    cls.main = main  # type: ignore[attr-defined]
    cls._is_backfill_app = True  # type: ignore[attr-defined]
    return cls


def _import(path: str) -> Any:
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def with_transactional_resource(
    transactional_resource_class: str, resource_name: str, reference_value_from: str | None = None
) -> Callable[[C], C]:
    """Give the job ``self.<name>_connection_factory`` and ``self.<name>_transaction_executor``."""

    def decorator(cls: C) -> C:
        extra = Namespace()
        resource = extra.namespace(resource_name)
        for option, default, doc, parse in DATABASE_OPTIONS:
            resource.add_option(
                option, default, doc, parse, reference_value_from=reference_value_from
            )
        base_required = getattr(cls, "required_config", Namespace())
        cls.required_config = base_required.merged(extra)  # type: ignore[attr-defined]
        original_init = cls.__init__  # type: ignore[misc]

        @functools.wraps(original_init)
        def __init__(self: Any, config: Any, job_information: Any) -> None:
            original_init(self, config, job_information)
            factory = _import(transactional_resource_class)(config[resource_name])
            setattr(self, f"{resource_name}_connection_factory", factory)
            executor = _import(DEFAULT_EXECUTOR)(config[resource_name], factory)
            setattr(self, f"{resource_name}_transaction_executor", executor)

        cls.__init__ = __init__  # type: ignore[misc]
        return cls

    return decorator


using_postgres = functools.partial(
    with_transactional_resource, DEFAULT_RESOURCE, "database", "resource.postgresql"
)
with_postgres_transactions = using_postgres


def with_resource_connection_as_argument(resource_name: str) -> Callable[[C], C]:
    """``run(self, connection, *args)``; the connection is closed afterwards, uncommitted work
    lost."""

    def decorator(cls: C) -> C:
        def _run_proxy(self: Any, *args: Any, **kwargs: Any) -> Any:
            factory = getattr(self, f"{resource_name}_connection_factory")
            with factory() as connection:
                try:
                    return self.run(connection, *args, **kwargs)
                finally:
                    factory.close_connection(connection, force=True)

        cls._run_proxy = _run_proxy  # type: ignore[attr-defined]
        return cls

    return decorator


def with_single_transaction(resource_name: str) -> Callable[[C], C]:
    """``run(self, connection, *args)`` inside one committed-or-rolled-back transaction."""

    def decorator(cls: C) -> C:
        def _run_proxy(self: Any, *args: Any, **kwargs: Any) -> Any:
            executor = getattr(self, f"{resource_name}_transaction_executor")
            return executor(self.run, *args, **kwargs)

        cls._run_proxy = _run_proxy  # type: ignore[attr-defined]
        return cls

    return decorator


with_postgres_connection_as_argument = functools.partial(
    with_resource_connection_as_argument, "database"
)
as_single_postgres_transaction = functools.partial(with_single_transaction, "database")
with_single_postgres_transaction = as_single_postgres_transaction


def with_subprocess(cls: C) -> C:
    """Add ``run_process(command, input=None) -> (returncode, stdout, stderr)``.

    A string runs through the shell, as in crontabber; a list runs without a
    shell, so its elements are never interpreted (crontabber quoted them
    naively and used the shell anyway). Outputs are stripped ``str``.
    """

    def run_process(self: Any, command: Any, input: str | None = None) -> tuple[int, str, str]:
        import subprocess  # here: an idle tick should not pay for it

        shell = isinstance(command, str)
        args = command if shell else [str(part) for part in command]
        done = subprocess.run(args, shell=shell, input=input, capture_output=True, text=True)
        return done.returncode, done.stdout.strip(), done.stderr.strip()

    cls.run_process = run_process  # type: ignore[attr-defined]
    return cls
