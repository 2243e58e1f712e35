"""``openqa serve``: the web page and the HTTP API (``app``) over the opened methods (``engines``)."""
