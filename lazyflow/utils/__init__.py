"""``lf.utils``: data loading (``lf.utils.data``)."""

from . import data

__all__ = ["data"]
