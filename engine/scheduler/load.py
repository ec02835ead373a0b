"""The node's load, judged once a second: what probing costs, what the node can hold, how
much of its loop the engine may take, and whether it is over capacity. Pure: each step
takes the second's figures and ``now``; the engine reads the clocks and counters.

- :class:`CostModel`: CPU seconds per probe by kind, learned from each second's CPU of the
  loop's thread and the probes that finished in it, by kind (least squares with forgetting:
  with one kind it is the moving average of CPU / probes; with several, seconds of different
  mixes tell the kinds apart). The requests answered on the same loop are three more
  regressors (:data:`API_KINDS`: reads, writes, pings, each of a cost of its own: a create
  costs several reads), so the API's CPU is not read as a dearer probe: were it, the
  capacity would shrink by the API's share and a burst of creates would all but stop the
  engine. Each probe kind's cost is bounded by what it cost in quiet seconds (little API
  work), where nothing can be mistaken for it; and a second whose budget held checks back
  while the loop ran well under the share it bought says the costs are too dear
  (:func:`overcharge`).
- :class:`Share`: the fraction of its core the engine may spend starting probes. It shrinks
  while the loop lags (the API, the database and the loop's own work need the rest) and grows
  back while it does not: quickly up to just under where the lag began, then slowly; the
  dispatcher turns it into a start rate (share / cost per probe).
- :class:`OverloadJudge`: over capacity once due checks were held back, or more was asked
  than the node can hold and it did less than was asked, for ``ON_AFTER`` seconds in a row;
  back under once nothing waited and it did what was asked (or the estimate says it can)
  for ``OFF_AFTER``; one :class:`Change` at each turn, so the log says it once each way.
  The estimate alone never turns it on: a node that does every probe asked, on time, is
  not over its capacity, whatever its cost model says.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

# Before any second was measured: an uptime probe (HTTP or resumed HTTPS) costs ~50-400 us
# (docs/performance.md), a certificate check makes a full, verified handshake.
DEFAULT_COST_S: Final = 0.0004
# The cost model's names for the requests answered on the loop (not check kinds): reads
# (GET, HEAD, OPTIONS), writes (creates, updates, deletes) and heartbeat pings.
API_READS: Final = "(api reads)"
API_WRITES: Final = "(api writes)"
PINGS: Final = "(pings)"
API_KINDS: Final = (API_READS, API_WRITES, PINGS)
PRIOR_COST_S: Final[Mapping[str, float]] = {
    "uptime": 0.0003, "certificate_health": 0.002,
    API_READS: 0.001, API_WRITES: 0.003, PINGS: 0.0003}
MIN_COST_S: Final = 0.00001  # a learned cost never goes below 10 us (nor to zero)
MAX_COST_S: Final = 0.5
FORGET: Final = 0.95  # each second's weight against the past: ~20 s of memory
PRIOR_VARIANCE: Final = 1e-4  # (10 ms)^2: how unsure the prior is, and the bound of it
MIN_PROBES_TO_LEARN: Final = 20  # a second with fewer finished probes says too little
QUIET_API: Final = 0.05  # a second whose requests took less of its CPU than this is quiet
QUIET_SEEN: Final = 5  # quiet seconds with a kind before its quiet cost bounds the fit
QUIET_SLACK: Final = 1.25  # the fit's cost of a kind is at most this times its quiet cost

MAX_SHARE: Final = 0.9  # the engine never plans to take more of the core than this
MIN_SHARE: Final = 0.2  # nor less, however the loop lags: every check is still probed
LAG_HIGH: Final = 0.02  # a sweep woken this late (s): the loop is too busy, shrink
LAG_LOW: Final = 0.005  # at most this late for a whole second: room, grow
SHRINK: Final = 0.8
GROW: Final = 0.05
# Back up to the ceiling (one SHRINK under the share at which the loop began to lag) the share
# grows by this factor a second: a burst of API work that took it to the floor costs the
# engine a few seconds, not the 14 that GROW alone would take from 0.2 to 0.9.
RECOVER: Final = 1.5

HELD_SECOND: Final = 0.5  # a second is "held" when due checks waited in this share of sweeps
ON_AFTER: Final = 3  # held seconds in a row before the node says it is overloaded
OFF_AFTER: Final = 5  # free seconds in a row before it says it no longer is
RATIO_ON: Final = 1.0  # asked over capacity above this: a held second
RATIO_OFF: Final = 0.95  # and below this (with nothing waiting): a free one


def cost_of(costs: Mapping[str, float], kind: str) -> float:
    """The cost of one probe of ``kind``: learned, else its prior, else the default."""
    c = costs.get(kind)
    if c is None:
        c = PRIOR_COST_S.get(kind, DEFAULT_COST_S)
    return c


class _Fit:
    """Recursive least squares with forgetting: each kind's cost from seconds of (CPU,
    count by kind); the costs start at their priors."""

    def __init__(self, kinds: Iterable[str]) -> None:
        self.kinds = list(kinds)
        self.costs: dict[str, float] = {k: cost_of({}, k) for k in self.kinds}
        n = len(self.kinds)
        # The estimate's covariance (CPU seconds squared per probe), one row per kind.
        self._p = [[PRIOR_VARIANCE if i == j else 0.0 for j in range(n)] for i in range(n)]

    def learn(self, cpu_s: float, x: list[float]) -> None:
        """One second: ``cpu_s`` and ``x``, the counts in the order of ``kinds``."""
        kinds, costs, p = self.kinds, self.costs, self._p
        n = len(kinds)
        px = [sum(p[i][j] * x[j] for j in range(n)) for i in range(n)]
        denom = FORGET + sum(x[i] * px[i] for i in range(n))
        gain = [v / denom for v in px]
        error = cpu_s - sum(costs[k] * x[i] for i, k in enumerate(kinds))
        for i, k in enumerate(kinds):
            costs[k] = min(MAX_COST_S, max(MIN_COST_S, costs[k] + gain[i] * error))
        # P = (P - gain (x^T P)) / FORGET; x^T P is px^T, P being symmetric.
        for i in range(n):
            row = p[i]
            for j in range(n):
                row[j] = (row[j] - gain[i] * px[j]) / FORGET
        # A kind unseen for long must not grow without bound (it would jump at its return).
        for i in range(n):
            if p[i][i] > PRIOR_VARIANCE:
                f = (PRIOR_VARIANCE / p[i][i]) ** 0.5
                for j in range(n):
                    p[i][j] *= f
                    p[j][i] *= f


class CostModel:
    """CPU seconds per probe by kind (see the module docstring): recursive least squares
    with forgetting over seconds of (CPU, probes finished by kind), so one kind's cost is
    the moving average of CPU / probes and several kinds' costs are told apart as soon as
    seconds of different mixes come.

    Beside it, a second fit over the probe kinds alone learns only from quiet seconds
    (the API's requests, at their priors, under :data:`QUIET_API` of the CPU), and bounds
    each kind it has seen in :data:`QUIET_SEEN` of them at :data:`QUIET_SLACK` times its
    quiet cost. With a steady API the full fit cannot tell a dearer probe beside cheaper
    requests from the truth (an API client that asks again as soon as it is answered takes
    whatever the probes leave, so every second fits both), and it drifts; once the drift
    makes the budget bind, admission feeds it (fewer probes started, each read dearer).
    The quiet fit has no API to confuse it with; a bound too low only admits more, which
    the lag then steers (:class:`Share`)."""

    def __init__(self, kinds: Iterable[str]) -> None:
        self._fit = _Fit(kinds)
        self.kinds = self._fit.kinds
        self.costs = self._fit.costs
        self._probe_kinds = [k for k in self.kinds if k not in API_KINDS]
        self._quiet = _Fit(self._probe_kinds)
        self._seen = dict.fromkeys(self._probe_kinds, 0)  # quiet seconds with the kind

    def learn(self, cpu_s: float, done: Mapping[str, int]) -> None:
        """One second: ``cpu_s`` spent by the loop's thread, ``done[kind]`` probes finished
        (kinds not given at construction are ignored)."""
        x = [float(done.get(k, 0)) for k in self.kinds]
        if sum(x) < MIN_PROBES_TO_LEARN or cpu_s <= 0:
            return
        self._fit.learn(cpu_s, x)
        probes = [float(done.get(k, 0)) for k in self._probe_kinds]
        if sum(probes) < MIN_PROBES_TO_LEARN:
            return
        api_s = sum(PRIOR_COST_S[k] * done.get(k, 0) for k in API_KINDS)
        if api_s <= QUIET_API * cpu_s:
            self._quiet.learn(cpu_s, probes)
            for k, n in zip(self._probe_kinds, probes, strict=True):
                if n > 0:
                    self._seen[k] += 1
        costs, quiet = self.costs, self._quiet.costs
        for k in self._probe_kinds:
            if self._seen[k] >= QUIET_SEEN and costs[k] > quiet[k] * QUIET_SLACK:
                costs[k] = quiet[k] * QUIET_SLACK

    def discount(self, factor: float) -> None:
        """Every probe kind's cost times ``factor`` (see :func:`overcharge`), in both fits;
        the next seconds learn from there."""
        for fit in (self._fit, self._quiet):
            for k in self._probe_kinds:
                fit.costs[k] = max(MIN_COST_S, fit.costs[k] * factor)

    def mean_cost(self, asked: Mapping[str, float]) -> float:
        """Cost of an average probe of the ``asked`` mix (probes/s by kind)."""
        total = sum(asked.values())
        if total <= 0:
            return cost_of(self.costs, "uptime")
        return sum(r * cost_of(self.costs, k) for k, r in asked.items()) / total


class Share:
    """The engine's share of its core, steered by the loop's lag, like a congestion window
    with slow start: a second that lags with checks held back shrinks it by SHRINK, and the
    first of a run of them sets the ceiling one SHRINK under the share it found. Below the
    ceiling, a second without such a lag grows it by RECOVER (that share held before); at or
    above it, a calm second (lag at most LAG_LOW, or nothing held) adds GROW and a lag
    between the bounds holds it. So a burst of API work costs the engine a few seconds, and
    a core that stays contended lowers the ceiling with each run of lagging seconds."""

    def __init__(self) -> None:
        self.value = MAX_SHARE
        self.ceiling = MAX_SHARE
        self._shrinking = False

    def step(self, worst_lag_s: float, held: bool) -> float:
        """One second: ``worst_lag_s`` the latest sweep wake-up, ``held`` whether due checks
        waited for the budget. Returns the new share. Only a share in use shrinks: while
        nothing waits, the engine runs below its budget and the lag is not its starts'."""
        if held and worst_lag_s > LAG_HIGH:
            if not self._shrinking:
                self.ceiling = max(MIN_SHARE, self.value * SHRINK)
                self._shrinking = True
            self.value = max(MIN_SHARE, self.value * SHRINK)
            return self.value
        self._shrinking = False
        if self.value < self.ceiling:
            self.value = min(self.ceiling, self.value * RECOVER)
        elif not held or worst_lag_s <= LAG_LOW:
            self.value = min(MAX_SHARE, self.value + GROW)
        return self.value


@dataclass(frozen=True, slots=True)
class Figures:
    """One second's load: probes/s asked (sum of 1/interval over the checks), done,
    and the capacity at the current cost and share."""

    asked: float
    done: float
    capacity: float

    @property
    def ratio(self) -> float:
        """Demand over capacity: above 1, the node cannot keep every check on time."""
        return self.asked / self.capacity if self.capacity > 0 else 0.0


@dataclass(frozen=True, slots=True)
class Change:
    overloaded: bool
    figures: Figures


class OverloadJudge:
    """Hysteresis over held seconds (module docstring). A second is held when due checks
    waited in at least ``HELD_SECOND`` of its sweeps, or more is asked than the node can hold
    (ratio above ``RATIO_ON``) and it did less than ``RATIO_OFF`` of what was asked (every
    check in flight, each probe slow); free when nothing waited and either it did what was
    asked or the ratio is under ``RATIO_OFF``."""

    def __init__(self) -> None:
        self.overloaded = False
        self._run = 0  # seconds in a row that point the other way

    def step(self, held_share: float, figures: Figures) -> Change | None:
        """One second: ``held_share`` of its sweeps ended with due checks waiting."""
        waited = held_share >= HELD_SECOND
        behind = figures.done < figures.asked * RATIO_OFF
        if self.overloaded:
            turn = not waited and (not behind or figures.ratio < RATIO_OFF)
        else:
            turn = waited or (figures.ratio > RATIO_ON and behind)
        if not turn:
            self._run = 0
            return None
        self._run += 1
        if self._run < (OFF_AFTER if self.overloaded else ON_AFTER):
            return None
        self.overloaded = not self.overloaded
        self._run = 0
        return Change(self.overloaded, figures)


CHARGED_FLOOR: Final = 0.85  # a budget-bound second whose CPU is under this of the share
MAX_DISCOUNT: Final = 0.5  # takes at most this much off the costs in one second


def overcharge(cpu_per_s: float, share: float, short_share: float) -> float | None:
    """The factor to take the learned costs down by, or None. In a second whose sweeps the
    budget held back (``short_share`` at least ``HELD_SECOND``), it spent the whole share on
    starts at the learned costs, so the loop's thread ran about ``share`` of it: were the
    costs right, ``cpu_per_s`` would be the share (or more, with the API's work). Under
    ``CHARGED_FLOOR`` of it, the costs are too dear by about that ratio. A learned cost is
    a moving average over the last ~20 s, so a transient (the node's start, a first round
    of full handshakes over few probes) keeps it dear long after, and while it binds the
    budget feeds it (fewer probes, each read dearer; docs/design.md, "Overload")."""
    if short_share < HELD_SECOND or share <= 0:
        return None
    ratio = cpu_per_s / share
    if ratio >= CHARGED_FLOOR:
        return None
    return max(MAX_DISCOUNT, ratio)


MIN_CORE: Final = 0.1  # the least of a core the node is taken to get, however contended


def core_available(cpu_per_s: float, worst_lag_s: float,
                   waited_per_s: float | None = None) -> float:
    """The fraction of a core the loop's thread gets, judged in a second whose sweeps woke
    late (``worst_lag_s`` over :data:`LAG_HIGH`; else a whole core). Where the kernel says
    how long the thread waited for a core (``waited_per_s``, seconds a second), the rest of
    the second: a loop kept late by a burst of its own work waited for nothing. Else a
    guess: the thread ran only ``cpu_per_s``, so it waited for a core it shares (other
    processes, PostgreSQL). The engine's share is of this, so on a contended machine the
    API keeps the rest of what the node gets. On time, a whole core, whatever the waits:
    the loop is not short of one."""
    if worst_lag_s <= LAG_HIGH:
        return 1.0
    if waited_per_s is not None:
        return min(1.0, max(MIN_CORE, 1.0 - waited_per_s))
    return min(1.0, max(MIN_CORE, cpu_per_s))


def capacity(share: float, mean_cost_s: float) -> float:
    """Probes/s the node can hold: the engine's share of its core over an average probe's
    cost."""
    return share / mean_cost_s if mean_cost_s > 0 else 0.0


def capacity_warning(asked: float, capacity: float | None) -> str | None:
    """Words for an operator when ``asked`` probes/s (every enabled check) exceed the live
    nodes' ``capacity`` (None: no node has measured one yet); None when within it."""
    if capacity is None or capacity <= 0 or asked <= capacity:
        return None
    return (f"The enabled checks ask for {asked:,.0f} probes/s; the live nodes can hold "
            f"{capacity:,.0f}/s at their measured cost per probe (load {asked / capacity:.2f}). "
            "Every check is still probed, but later than its interval: add a node, run the "
            "API apart (--role api / --role engine), or lengthen intervals (docs/operations.md,"
            " Capacity and overload).")
