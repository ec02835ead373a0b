"""The public face of a monitor: the status page (``page`` serves, ``view`` builds the view
model, ``history`` adds the day lines and phase chart, ``notice`` the maintenance notices)
and its badges (``badges``). Public: it shows a host, never a URL or an address."""
