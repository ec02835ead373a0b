"""Kinds of checks behind one seam (:mod:`engine.kinds.base`): each kind a module (uptime,
certificate) that says how to probe a check, how to judge its outcome and what to show;
registered in :mod:`engine.kinds.registry`; the uptime kind's probers by URL scheme in
:mod:`engine.kinds.uptime_probers`. Also the check as the engine holds it
(:mod:`engine.kinds.scheduled`).

May import monitors, probes, domain and runtime; never db, scheduler, web or anything above.
"""
