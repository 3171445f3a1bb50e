"""The web console: the broker's data directory in a browser (``compactlog serve --http 127.0.0.1:8080``).

It is an adapter like the Kafka listeners: it runs in the ``serve`` process, on the same event loop,
and reads the same ``CompactLog``, group coordinator, credentials and ACLs the broker answers from. Its
own thread does anything that touches the disk, so a slow page waits for its own thread, never
for the broker's: a produce request is not queued behind a page.

Layout: ``app.py`` (the page registry and the middleware, composed into the application),
``runtime.py`` (the running console: its thread, sessions, jobs and listeners), ``handlers.py`` (what
every page handler shares), ``auth.py`` (logins with the SASL credentials, sessions, CSRF, ACL checks),
``render.py`` (Jinja templates, escaped by default), ``jobs.py`` (long actions with progress),
``charts.py`` (server-rendered SVG) and one module per page under ``pages/``. ``compactlog serve``
builds the console (``app.build``) and runs it beside the broker; the broker does not import it.
"""
