'use strict'
// fencelock's lock metrics for prom-client. The numbers are counted once, in
// the Rust driver, for every native client of the process: acquires by
// outcome, attempts that found the lock held, auto-renewals by outcome,
// leases lost, releases by outcome, and the acquire latency and wait time
// histograms. Nothing is counted until install() (or enable()); a scrape
// then reads every family in one native call, so no JavaScript runs per
// lock event and the driver never waits for the JS thread. prom-client is
// never required here: install() takes your registry.
const native = require('./native.js')

/** Start counting (idempotent). install() calls it. */
function enable() {
  native.metricsEnable()
}

/**
 * Every metric now, by name (Prometheus's names without the `_total` of
 * counters): a counter family maps its `outcome` label ('' when it has none)
 * to the count; a histogram is `{ buckets: [[upper bound s, cumulative count]],
 * count, sum }`.
 */
function snapshot() {
  const families = {}
  for (const family of native.metricsSnapshot()) {
    families[family.name] =
      family.kind === 'counter'
        ? Object.fromEntries(family.samples.map((s) => [s.labels.outcome ?? '', s.value]))
        : { buckets: family.buckets.map((b) => [b.le, b.count]), count: family.count, sum: family.sum }
  }
  return families
}

/** One family as a prom-client metric (the interface its Registry reads). */
class Family {
  #base
  constructor(family, openMetrics) {
    this.#base = family.name
    // The Prometheus text format spells a counter's samples with `_total`;
    // OpenMetrics adds it itself.
    this.name = family.kind === 'counter' && !openMetrics ? `${family.name}_total` : family.name
    this.help = family.help
    this.type = family.kind
    this.aggregator = 'sum'
  }

  async get() {
    const family = native.metricsSnapshot().find((f) => f.name === this.#base)
    const values =
      family.kind === 'counter'
        ? family.samples.map((s) => ({ labels: { ...s.labels }, value: s.value }))
        : [
            ...family.buckets.map((b) => ({ metricName: `${this.name}_bucket`, labels: { le: b.le }, value: b.count })),
            { metricName: `${this.name}_bucket`, labels: { le: '+Inf' }, value: family.count },
            { metricName: `${this.name}_sum`, labels: {}, value: family.sum },
            { metricName: `${this.name}_count`, labels: {}, value: family.count },
          ]
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator }
  }

  /** The counts are the process's: a registry reset leaves them. */
  reset() {}
}

/**
 * Count (see enable()) and expose the counts on `registry`, a prom-client
 * Registry (e.g. `require('prom-client').register`). Installing twice on one
 * registry throws, as prom-client does for any metric registered twice.
 */
function install(registry) {
  if (registry === null || typeof registry !== 'object' || typeof registry.registerMetric !== 'function') {
    const e = new TypeError('metrics.install(registry) needs a prom-client Registry')
    e.code = 'ERR_INVALID_ARG_TYPE'
    throw e
  }
  const openMetrics = String(registry.contentType ?? '').startsWith('application/openmetrics-text')
  const families = native.metricsSnapshot().map((family) => new Family(family, openMetrics))
  for (const family of families) {
    if (registry.getSingleMetric?.(family.name) !== undefined) {
      throw new Error(`metrics.install: ${family.name} is already registered on this registry`)
    }
  }
  enable()
  for (const family of families) registry.registerMetric(family)
}

module.exports = { enable, install, snapshot }
