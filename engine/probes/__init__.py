"""The probes: uptime (``http.HttpProber``) and certificate (``tls.CertProber``).

Both return plain outcomes (``outcome``), never raise (except cancellation) and never outlive
their timeout. ``_net`` holds what they share: checked resolution, TLS over memory BIOs,
cheap deadlines and the words for errors.
"""
