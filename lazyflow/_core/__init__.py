"""Lowest layer: dtypes, devices, errors, process configuration. Imports nothing else of lazyflow."""
