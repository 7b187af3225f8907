// What an operator sees: vesseld's health and its Prometheus numbers
// (GET /healthz and GET /metrics, both aggregate and unauthenticated on
// the API listener): sandboxes by state, warm pools, the create rate and
// the egress gateway's decisions; and the nodes (GET /v1/nodes, which
// only an operator's key may read: the page is linked for those).
import { api } from './api.js'
import { errorBox, h } from './dom.js'

// Prometheus text into [{name, labels, value}].
export function parseMetrics(text) {
  const out = []
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)/.exec(line)
    if (!m) continue
    const labels = {}
    for (const l of (m[3] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2]
    out.push({ name: m[1], labels, value: Number(m[4]) })
  }
  return out
}

const table = (head, rows) =>
  h('table', {}, h('thead', {}, h('tr', {}, ...head.map((t) => h('th', {}, t)))),
    h('tbody', {}, ...rows.map((r) => h('tr', {}, ...r.map((c) => h('td', {}, c))))))

export function operatorPage({ cleanup }) {
  const err = errorBox()
  const out = h('div')
  let previous = null // {at, creates}
  const load = async () => {
    try {
      const [health, metricsText, nodes] = await Promise.all([
        fetch('/healthz').then((r) => r.json()),
        fetch('/metrics').then((r) => r.text()),
        api('GET', '/v1/nodes'),
      ])
      const m = parseMetrics(metricsText)
      const pick = (name) => m.filter((s) => s.name === name)
      const creates = pick('vessel_operation_duration_seconds_count').filter((s) => s.labels.kind === 'create')
        .reduce((n, s) => n + s.value, 0)
      const now = Date.now()
      const rate = previous ? ((creates - previous.creates) * 60_000) / (now - previous.at) : null
      previous = { at: now, creates }
      const pools = new Map()
      for (const s of m.filter((x) => x.name.startsWith('vessel_warm_pool_'))) {
        const p = pools.get(s.labels.template) ?? {}
        p[s.name.slice('vessel_warm_pool_'.length)] = s.value
        pools.set(s.labels.template, p)
      }
      out.replaceChildren(
        h('h2', {}, 'Nodes'),
        table(['Node', 'State', 'Sandboxes', 'Memory free / host (MiB)', 'vCPUs', 'Accelerator', 'Templates', 'Last heard'],
          nodes.nodes.map((n) => [n.name, n.state, n.sandboxes, `${n.memory_free_mib} / ${n.memory_mib}`, n.vcpus, n.accel,
            n.templates.length, n.heartbeat_at ? new Date(n.heartbeat_at).toLocaleTimeString() : 'now'])),
        h('h2', {}, 'This vesseld'),
        h('pre', { class: 'log' }, JSON.stringify(health, null, 2)),
        h('h2', {}, 'Sandboxes by state (every tenant)'),
        table(['State', 'Sandboxes'], pick('vessel_sandboxes').filter((s) => s.value > 0).map((s) => [s.labels.state, s.value])),
        h('h2', {}, 'Creates'),
        h('p', {}, `${creates} in all`, rate === null ? '' : `; ${rate.toFixed(1)} a minute over the last 5 s`),
        h('h2', {}, 'Warm pools'),
        table(['Template', 'Ready VMs', 'Target', 'Hits', 'Misses'],
          [...pools.entries()].map(([t, p]) => [t ?? '—', p.vms ?? 0, p.target_vms ?? 0, p.hits_total ?? 0, p.misses_total ?? 0])),
        h('h2', {}, 'Egress decisions'),
        table(['Kind', 'Verdict', 'Reason', 'Count'],
          pick('vessel_gateway_events_total').map((s) => [s.labels.kind, s.labels.verdict, s.labels.reason, s.value])))
    } catch (e) {
      err.show(e)
    }
  }
  load()
  const t = setInterval(load, 5000)
  cleanup(() => clearInterval(t))
  return h('section', {}, h('h1', {}, 'Operator'), err, out)
}
