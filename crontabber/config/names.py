"""Which option names exist, and the strict check of the names a
configuration uses.

A misspelled name must not pass silently (``keep_dayz=90`` would leave the job
on its default), so every name set in ``crontabber.ini`` or on the command line
must be one of:

- an option declared by the runner (:func:`crontabber.config.runner_options`)
  or by a configured job (:func:`crontabber.config.catalog.job_options`): the set is
  computed from the declarations, so a newly declared option is known at once;
- the option a declared one takes its value from (``reference_value_from``:
  ``resource.postgresql.host``, ``secrets.sentry.dsn``);
- a crontabber 0.18 option that has no effect here (:data:`LEGACY`): accepted so
  an old ``crontabber.ini`` still loads, and listed by ``--configtest``;
- anything in the ``[[class-X]]`` section of a job whose line is commented out
  in the ``jobs`` list (``# jobs.prune.PruneS3CronApp|1d``): taking a job out by
  commenting its line keeps its options for later. Deleting the line and
  keeping the section is an error: the section then looks like a misspelling.
  The same holds for every job of the INI file's list when the command line or
  the environment replaces that list.

The environment is not checked strictly: it holds every program's variables,
and its upper-case spelling cannot be mapped back to one option name.
:func:`environment_notes` lists ``CRONTABBER_*`` and dotted names that match
nothing, for ``--configtest`` to show.
"""

from __future__ import annotations

from ..errors import ConfigurationError
from ..frozen import Frozen
from ..schedule import split_pieces
from .options import Namespace

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Iterable, Mapping

# crontabber 0.18's own options that
# this runner does not use: class paths of its pluggable parts, its
# syslog/stderr logging, configman's admin options.
_LOGGING_0_18 = (
    "stderr_error_logging_level",
    "stderr_line_format_string",
    "syslog_error_logging_level",
    "syslog_facility_string",
    "syslog_line_format_string",
    "syslog_host",
    "syslog_port",
)
LEGACY: frozenset[str] = frozenset(
    {
        "application",
        "admin.strict",
        "admin.expose_secrets",
        "admin.print_conf",
        "admin.dump_conf",
        "crontabber.job_state_db_class",
        "crontabber.database_class",
        "crontabber.transaction_executor_class",
        "resource.postgresql.database_class",
        "resource.postgresql.transaction_executor_class",
        *(f"logging.{name}" for name in _LOGGING_0_18),
        *(f"resource.logging.{name}" for name in _LOGGING_0_18),
    }
)
# The same, under each configured job that has a ``database`` namespace.
LEGACY_DATABASE = (
    "database_class",
    "database_transaction_executor_class",
    "transaction_executor_class",
)


def _fold(names: Iterable[str]) -> dict[str, str]:
    """Lower-cased name -> name as declared (matching ignores case, as reading
    values does; messages show the declared spelling)."""
    return {name.lower(): name for name in names}


def _section(dotted: str) -> str:
    """``crontabber.class-X`` of a job option's name (else the first two parts)."""
    return ".".join(dotted.split(".")[:2])


class KnownNames(Frozen):
    """The option names a configuration may use, each keyed by its lower case.

    ``names``: declared and referenced options; ``legacy``: crontabber 0.18's
    options that do nothing here; ``open_sections``: the ``crontabber.class-X``
    of commented-out jobs, under which anything goes.
    """

    names: Mapping[str, str]
    legacy: Mapping[str, str]
    open_sections: Mapping[str, str]

    def classify(self, dotted: str) -> str:
        """``"known"``, ``"legacy"``, ``"open"`` (in a commented-out job's section)
        or ``"unknown"``."""
        lowered = dotted.lower()
        if lowered in self.names:
            return "known"
        if lowered in self.legacy:
            return "legacy"
        if _section(lowered) in self.open_sections and lowered.count(".") > 1:
            return "open"
        return "unknown"

    def sections(self) -> dict[str, str]:
        """Every ``crontabber.class-X`` a configuration may have, by lower case."""
        found = _fold(
            _section(name) for name in self.names.values() if name.startswith("crontabber.class-")
        )
        return {**found, **self.open_sections}

    def closest(self, dotted: str, pool: Mapping[str, str]) -> str | None:
        """The name of ``pool`` nearest to ``dotted`` (difflib), as declared."""
        import difflib  # only on a mistake: not on every tick

        found = difflib.get_close_matches(dotted.lower(), sorted(pool), n=1, cutoff=0.6)
        return pool[found[0]] if found else None


def declared_names(namespace: Namespace, prefix: tuple[str, ...] = ()) -> set[str]:
    """Every option of ``namespace``, every option one of them refers to, and the old name
    of every renamed one (still read: deprecated)."""
    names: set[str] = set()
    for path, option in namespace.walk(prefix):
        names.add(".".join([*path, option.name]))
        if option.formerly:  # a renamed option's old name: still read (deprecated)
            names.add(".".join([*path, option.formerly]))
        if option.reference_value_from:
            names.add(f"{option.reference_value_from}.{option.name}")
    return names


def commented_classes(jobs_text: str, live_too: bool = False) -> set[str]:
    """Class names of the commented-out entries of a ``jobs`` list
    (``# jobs.prune.PruneS3CronApp|1d``), split as :func:`split_jobs_list` does;
    with ``live_too``, of every entry."""
    pieces = split_pieces(jobs_text)
    return {
        piece.lstrip("#").split("|")[0].strip().rpartition(".")[2]
        for piece in pieces
        if (live_too or piece.startswith("#")) and "|" in piece
    }


def known_names(
    runner: Namespace,
    jobs: Iterable[tuple[tuple[str, ...], Namespace]],
    jobs_text: str,
    ini_jobs_text: str = "",
) -> KnownNames:
    """The names a configuration may use.

    Args:
        runner: the runner's options.
        jobs: each configured job's namespace path and options.
        jobs_text: the effective ``jobs`` list as written (its comments included).
        ini_jobs_text: the INI file's own ``jobs`` list: when the command line or
            the environment replaces it (a host running a subset), the sections
            of every job it lists stay allowed.
    """
    names = declared_names(runner)
    legacy = set(LEGACY)
    for path, options in jobs:
        declared = declared_names(options, path)
        names |= declared
        database = ".".join([*path, "database", ""])
        if any(name.startswith(database) for name in declared):
            legacy |= {database + name for name in LEGACY_DATABASE}
    folded = _fold(names)
    configured = {_section(name) for name in folded if name.startswith("crontabber.class-")}
    classes = commented_classes(jobs_text) | commented_classes(ini_jobs_text, live_too=True)
    open_sections = _fold(f"crontabber.class-{cls}" for cls in classes)
    return KnownNames(
        folded, _fold(legacy), {k: v for k, v in open_sections.items() if k not in configured}
    )


def check_names(known: KnownNames, names: Iterable[str], source: str | None) -> list[str]:
    """Refuse any name that is not known; return the legacy ones.

    Args:
        names: dotted names as spelled in the source.
        source: the INI file's path, or None for the command line (names are
            then shown as ``--name``).

    Raises:
        ConfigurationError: naming the first unknown name and the closest known one.
    """
    legacy = []
    for dotted in names:
        kind = known.classify(dotted)
        if kind == "legacy":
            legacy.append(dotted)
        elif kind == "unknown":
            where = source or f"--{dotted}"
            raise ConfigurationError(where, _unknown_message(known, dotted, source is None))
    return legacy


def check_sections(known: KnownNames, sections: Iterable[str], source: str) -> None:
    """Refuse a section that holds no known option, even an empty one.

    Raises:
        ConfigurationError: naming the first such section and the closest known one.
    """
    prefixes: dict[str, str] = dict(known.open_sections)
    for name in (*known.names.values(), *known.legacy.values()):
        parts = name.split(".")
        prefixes |= _fold(".".join(parts[:end]) for end in range(1, len(parts)))
    for dotted in sections:
        if dotted.lower() in prefixes or known.classify(dotted) == "open":
            continue
        if _is_unknown_job_section(known, dotted):
            raise ConfigurationError(source, _job_section_message(known, dotted, ""))
        found = known.closest(dotted, prefixes)
        guess = f"; did you mean [{found}]?" if found else ""
        raise ConfigurationError(source, f"no such section [{dotted}]{guess} (see --help)")


def _is_unknown_job_section(known: KnownNames, dotted: str) -> bool:
    section = _section(dotted).lower()
    return section.startswith("crontabber.class-") and section not in known.sections()


def _job_section_message(known: KnownNames, dotted: str, setting: str) -> str:
    section = _section(dotted)
    found = known.closest(section, known.sections())
    guess = f"; did you mean [[{found.split('.')[1]}]]?" if found else ""
    return (
        f"no configured job has the section [[{section.split('.')[1]}]]{setting}{guess}"
        " (a job taken out of the jobs list keeps its section if its line is"
        " commented out with #, not deleted)"
    )


def _unknown_message(known: KnownNames, dotted: str, on_command_line: bool) -> str:
    flag = "--" if on_command_line else ""
    if _is_unknown_job_section(known, dotted):
        return _job_section_message(known, dotted, f" (setting {flag}{dotted})")
    found = known.closest(dotted, {**known.names, **known.legacy})
    guess = f"; did you mean {flag}{found}?" if found else ""
    shown = "" if on_command_line else f" {dotted}"
    return f"no such option{shown}{guess} (see --help)"


#: ``CRONTABBER_*`` variables that are no option: read before any option is (config.inicache).
NOT_OPTIONS = ("CRONTABBER_INI_CACHE", "CRONTABBER_HOST_NAME")


def environment_notes(known: KnownNames, environ: Mapping[str, str]) -> list[str]:
    """Variables that look like crontabber options but match none.

    Only ``CRONTABBER_*`` and dotted names under a known namespace are looked
    at: other variables belong to other programs.
    """
    upper = {_upper(name): name for name in (*known.names.values(), *known.legacy.values())}
    open_upper = tuple(_upper(section) + "_" for section in known.open_sections)
    roots = {name.split(".")[0] for name in known.names}
    notes = []
    for variable in sorted(environ):
        guess: str | None
        if "." in variable:
            if variable.split(".")[0].lower() not in roots or known.classify(variable) != "unknown":
                continue
            guess = known.closest(variable, known.names)
        elif variable.upper().startswith("CRONTABBER_"):
            if variable.upper() in NOT_OPTIONS:
                continue
            if _upper(variable) in upper or _upper(variable).startswith(open_upper):
                continue
            found = known.closest(_upper(variable), _fold(upper))
            guess = found
        else:
            continue
        notes.append(
            f"environment variable {variable} matches no option"
            + (f" (did you mean {guess}?)" if guess else "")
        )
    return notes


def _upper(name: str) -> str:
    """everett's upper-case spelling of a dotted name, dashes as underscores."""
    return name.upper().replace(".", "_").replace("-", "_")
