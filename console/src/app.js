// Vessel's web console: sign-in, the pages, and the tenant's event stream.
// Routes are the URL's hash (#/, #/sandbox/ID, #/templates, #/operator),
// so vesseld serves one page and nothing else.
import { api, clearKey, controlEvents, key, setKey } from './api.js'
import { age, errorBox, h, stateBadge } from './dom.js'
import { operatorPage } from './operator.js'
import { sandboxPage } from './sandbox.js'
import { templatesPage } from './templates.js'

const main = document.getElementById('main')
const nav = document.getElementById('nav')

// The tenant's events (GET /v1/events), one stream for the tab: pages
// subscribe; template builds' events are kept for the templates page.
const events = {
  listeners: new Set(),
  builds: new Map(), // template name -> {state, lines: []}
  abort: null,
  start() {
    this.stop()
    const abort = (this.abort = new AbortController())
    let last
    const run = () =>
      controlEvents('/v1/events', {
        signal: abort.signal,
        headers: last ? { 'Last-Event-ID': last } : {},
        onEvent: (ev) => {
          last = ev.id ?? last
          this.keepBuild(ev)
          for (const l of this.listeners) l(ev)
        },
      }).catch(() => {}).finally(() => {
        // A dropped stream comes back, resuming after the last event seen.
        if (!abort.signal.aborted) setTimeout(run, 2000)
      })
    run()
  },
  stop() {
    this.abort?.abort()
  },
  keepBuild({ event, data }) {
    if (!event.startsWith('template.') || !data?.template && !data?.name) return
    const name = data.template ?? data.name
    const b = this.builds.get(name) ?? { state: 'building', lines: [] }
    if (event === 'template.log') b.lines.push(data.text ?? `[${data.kind}] step ${data.step}${data.seconds ? ` ${data.seconds}s` : ''}`)
    if (event === 'template.progress') b.state = `step ${data.step} (${data.percent}%)`
    if (event === 'template.built') b.state = `built ${data.version}`
    if (b.lines.length > 2000) b.lines.splice(0, b.lines.length - 2000)
    this.builds.set(name, b)
  },
}

function signIn() {
  nav.hidden = true
  const input = h('input', { type: 'password', name: 'key', autocomplete: 'off', placeholder: 'vsk_…', 'aria-label': 'API key' })
  const err = errorBox()
  const submit = async () => {
    setKey(input.value.trim())
    try {
      await api('GET', '/v1/sandboxes?page_size=1')
      route()
    } catch (e) {
      clearKey()
      err.show(e.status === 401 ? 'That key is not valid.' : e)
    }
  }
  input.addEventListener('keydown', (e) => e.key === 'Enter' && submit())
  main.replaceChildren(
    h('div', { class: 'signin' },
      h('h1', {}, 'Sign in'),
      h('p', { class: 'muted' }, 'With an API key (make up prints the development one; it is in <state dir>/dev-api-key). It stays in this tab only.'),
      input,
      h('button', { type: 'button', class: 'primary', id: 'signin', onclick: submit }, 'Sign in'),
      err))
  input.focus()
}

function sandboxesPage({ cleanup }) {
  const err = errorBox()
  const body = h('tbody')
  const templateSelect = h('select', { 'aria-label': 'template', name: 'template' })
  let sandboxes = []
  // What the running ones use, measured by their node (the first 50).
  const usage = new Map() // id -> GET /v1/sandboxes/{id}/metrics
  const mib = (b) => `${Math.round(b / 1048576)}`
  const render = () =>
    body.replaceChildren(...sandboxes.map((s) => {
      const u = s.state === 'running' ? usage.get(s.id) : undefined
      return h('tr', { 'data-sandbox': s.id, 'data-state': s.state },
        h('td', {}, h('a', { href: `#/sandbox/${s.id}` }, s.id)),
        h('td', {}, stateBadge(s.state)),
        h('td', {}, s.template),
        h('td', {}, age(s.created_at)),
        h('td', {}, s.node ?? 'this machine'),
        h('td', { class: 'memory' }, u ? `${mib(u.mem_used_bytes)} / ${s.memory_mib} MiB` : `${s.memory_mib} MiB`),
        h('td', { class: 'cpu' }, u ? `${u.cpu_used_pct.toFixed(1)}% of ${s.vcpus}` : `${s.vcpus}`))
    }))
  const measure = async () => {
    const running = sandboxes.filter((s) => s.state === 'running').slice(0, 50)
    await Promise.all(running.map((s) => api('GET', `/v1/sandboxes/${s.id}/metrics`).then(
      (m) => usage.set(s.id, m), () => usage.delete(s.id))))
    render()
  }
  const load = async () => {
    try {
      const all = []
      let token = ''
      do {
        const page = await api('GET', `/v1/sandboxes?page_size=100${token ? `&page_token=${encodeURIComponent(token)}` : ''}`)
        all.push(...page.sandboxes)
        token = page.next_page_token
      } while (token && all.length < 1000)
      sandboxes = all.filter((s) => s.state !== 'deleted')
      render()
      measure()
    } catch (e) {
      err.show(e)
    }
  }
  // Live: a sandbox's state event reloads the list (coalesced).
  let pending = null
  const onEvent = ({ event }) => {
    if (!event.startsWith('sandbox.') && !event.startsWith('operation.')) return
    clearTimeout(pending)
    pending = setTimeout(load, 250)
  }
  events.listeners.add(onEvent)
  const tick = setInterval(measure, 10_000)
  cleanup(() => {
    events.listeners.delete(onEvent)
    clearInterval(tick)
    clearTimeout(pending)
  })
  api('GET', '/v1/templates').then((t) => {
    templateSelect.replaceChildren(...t.templates.map((x) => h('option', { value: x.name }, x.name)))
  }, (e) => err.show(e))
  const create = async () => {
    err.show(null)
    try {
      const r = await api('POST', '/v1/sandboxes', { template: templateSelect.value })
      sandboxes = [r.sandbox, ...sandboxes.filter((s) => s.id !== r.sandbox.id)]
      render()
    } catch (e) {
      err.show(e)
    }
  }
  load()
  return h('section', {},
    h('h1', {}, 'Sandboxes'),
    h('div', { class: 'row' }, templateSelect, h('button', { type: 'button', class: 'primary', id: 'create', onclick: create }, 'Create sandbox')),
    err,
    h('table', { id: 'sandboxes' },
      h('thead', {}, h('tr', {}, ...['ID', 'State', 'Template', 'Age', 'Node', 'Memory (used / size)', 'CPU (use of vCPUs)'].map((t) => h('th', {}, t)))),
      body))
}

// Whether this key is an operator's (GET /v1/nodes answers it, 403 for
// others): asked once per sign-in; the Operator page is shown to those.
let operator = null
async function checkOperator() {
  if (operator !== null) return
  operator = await api('GET', '/v1/nodes').then(() => true, () => false)
  document.getElementById('operator-link').hidden = !operator
}

let cleanups = []
function route() {
  for (const c of cleanups) c()
  cleanups = []
  if (!key()) return signIn()
  nav.hidden = false
  checkOperator()
  if (!events.abort || events.abort.signal.aborted) events.start()
  const ctx = { go: (hash) => (location.hash = hash), cleanup: (f) => cleanups.push(f), events }
  const hash = location.hash || '#/'
  let page
  if (hash.startsWith('#/sandbox/')) page = sandboxPage(decodeURIComponent(hash.slice('#/sandbox/'.length)), ctx)
  else if (hash === '#/templates') page = templatesPage(ctx)
  else if (hash === '#/operator') page = operatorPage(ctx)
  else page = sandboxesPage(ctx)
  main.replaceChildren(page)
}

document.getElementById('signout').addEventListener('click', () => {
  events.stop()
  clearKey()
  operator = null
  document.getElementById('operator-link').hidden = true
  location.hash = '#/'
  route()
})
window.addEventListener('hashchange', route)
route()
