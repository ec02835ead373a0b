"""Upwatch's tests, in folders by area; shared helpers in :mod:`tests.support`, shared fixtures in
``conftest.py``. A package, so that every test module has one name (``tests.<area>.<file>``)
however pytest is started."""
