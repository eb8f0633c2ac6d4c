"""A compatibility shim for crontabber apps written against configman.

configman 1.3.0 (the last release, 2016) does not import on Python 3.10+
(``collections.MutableSet``), so no Python 3 crontabber app can use the real
one. Apps typically do::

    from configman import Namespace, RequiredConfig
    from configman.converters import class_converter

This package provides those names on top of :mod:`crontabber.config.options`, so
such apps run unchanged. It covers declaring options, not configman's
ConfigurationManager.
"""

from crontabber.config.options import DotDict, Namespace, RequiredConfig

__all__ = ["DotDict", "Namespace", "RequiredConfig"]
