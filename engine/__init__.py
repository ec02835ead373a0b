"""Upwatch: self-hosted website monitoring engine."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("upwatch")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0"

USER_AGENT = f"Upwatch/{__version__}"
