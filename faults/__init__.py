"""The fault suite (`make faults`): the same faults thrown at the whole system many times.

Each fault module in `faults.registry.MODULES` exposes

    run(scale: float) -> list[FaultResult]

It throws its faults against the real services (the addresses come from the
environment, as for the tests: `.services/env`), lets the system recover, checks
the invariants, and returns one `FaultResult` per fault kind. `scale` multiplies
the default counts: 1.0 is the published run (~30 minutes on 2 cores), a small
value such as 0.05 a quick try while developing.

`python -m faults` runs them all (or `--only NAME ...`), keeps each module's
results in `.services/faults/NAME.json`, and writes `docs/reliability.md` from
every module's last results, so one module can be rerun alone.
"""
