"""Eager mode: the cached op-signature interpreter and its cache controls."""

from .cache import (
    CacheInfo,
    CacheLimitError,
    CacheLimitTypeError,
    cache_info,
    clear_cache,
    get_cache_limit,
    set_cache_limit,
)
from .interpreter import INTERPRETER, EagerInterpreter

__all__ = [
    "CacheInfo",
    "CacheLimitError",
    "CacheLimitTypeError",
    "cache_info",
    "clear_cache",
    "set_cache_limit",
    "get_cache_limit",
    "INTERPRETER",
    "EagerInterpreter",
]
