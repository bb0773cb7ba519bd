"""lazyflow's version (one place: the package, the compile cache fingerprint and pyproject.toml agree)."""

__version__ = "0.1.0"
