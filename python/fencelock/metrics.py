"""fencelock's lock metrics for Prometheus (``prometheus_client``).

The numbers are counted once, in the Rust driver, for every client of the
process (Python, and Rust code in the same process): acquires by outcome,
acquire attempts that found the lock held, auto-renewals by outcome,
leases lost, releases by outcome, and two histograms, the acquire latency
(the winning attempt's round trip) and the wait time (from calling
``acquire`` to getting the lease). They carry no lock names (names are
unbounded); the ``fencelock`` logger has those at level 5 (``TRACE``).

    from prometheus_client import CollectorRegistry, generate_latest
    import fencelock.metrics

    registry = CollectorRegistry()
    fencelock.metrics.install(registry)   # default: prometheus_client.REGISTRY
    print(generate_latest(registry).decode())

Nothing is counted until :func:`install` (or :func:`enable`) is called;
then recording costs a few atomic increments per event, and a scrape reads
them all in one call: no Python code runs per event, and no runtime thread
ever waits for the GIL.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Tuple

from . import _native

__all__ = ["enable", "install", "snapshot"]


def enable() -> None:
    """Start counting (idempotent). :func:`install` calls it."""
    _native._metrics_enable()


def snapshot() -> Dict[str, Any]:
    """Every metric now, by name: a counter family is a dict from its
    ``outcome`` label (``""`` when it has none) to the count; a histogram
    is ``{"buckets": [(upper bound in seconds, cumulative count), ...],
    "count": n, "sum": seconds}``. Names are Prometheus's without the
    ``_total`` of counters."""
    families: Dict[str, Any] = {}
    for family in _native._metrics_snapshot():
        if family[2] == "counter":
            families[family[0]] = {
                labels.get("outcome", ""): value for labels, value in family[3]
            }
        else:
            families[family[0]] = {
                "buckets": list(family[3]),
                "count": family[4],
                "sum": family[5],
            }
    return families


class _Collector:
    """A ``prometheus_client`` custom collector: reads the driver's
    counters at each scrape."""

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily

        for family in _native._metrics_snapshot():
            name, help_text, kind = family[0], family[1], family[2]
            if kind == "counter":
                samples: List[Tuple[Dict[str, str], int]] = family[3]
                labels = sorted({key for labels, _ in samples for key in labels})
                counter = CounterMetricFamily(name, help_text, labels=labels)
                for values, value in samples:
                    counter.add_metric([values[key] for key in labels], value)
                yield counter
            elif kind == "histogram":
                # repr: "0.00025", "2.5", "10.0", as prometheus_client spells them.
                buckets = [(repr(bound), count) for bound, count in family[3]]
                buckets.append(("+Inf", family[4]))
                yield HistogramMetricFamily(
                    name, help_text, buckets=buckets, sum_value=family[5]
                )

    def describe(self) -> Iterator[Any]:
        # Registering reads the families' names (collect() with no values
        # yet is enough, and it never fails).
        return self.collect()


def install(registry: Any = None) -> None:
    """Count (see :func:`enable`) and expose the counts on ``registry``, a
    ``prometheus_client`` ``CollectorRegistry`` (default: its global
    ``REGISTRY``). ``prometheus_client`` is imported here, so it is only
    needed by applications that call this. Installing twice on one registry
    raises ``ValueError`` (duplicated timeseries), as ``prometheus_client``
    does for any collector."""
    if registry is None:
        from prometheus_client import REGISTRY

        registry = REGISTRY
    if not callable(getattr(registry, "register", None)):
        raise TypeError(
            f"registry must be a prometheus_client CollectorRegistry, not {type(registry).__name__}"
        )
    enable()
    registry.register(_Collector())
