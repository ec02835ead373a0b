"""Standalone tools, each answering one question, each run as ``python -m upwatch_bench.lab.X``:

- ``tlscompare``: what does the HTTPS uptime probe cost in CPU per connection against
  ``openssl s_time -new`` / ``-reuse``, per TLS layer, protocol and certificate type? (Its
  ``openssl s_server`` helpers also serve the product's TLS tests.)
- ``tlsinstr``: the same question in user-space instructions (callgrind), which do not
  drift with the machine's load as timings do.
"""
