"""The console's pages, one module each; every module holds a ``routes`` table and may hold ``setup(console)``."""

from . import cleaner, compression, groups, jobs, login, messages, overview, topics

PAGES = [login, overview, topics, messages, groups, cleaner, compression, jobs]
