"""The console's pages, one module each; every module holds a ``routes`` table and may hold
``setup(console)``. They import what pages share (``handlers.py``, ``runtime.py``); ``app.py`` lists them."""
