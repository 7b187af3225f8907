// One sandbox: what it is, its actions (pause, resume, fork, extend,
// delete), and its terminal, files, log (followed) and metrics.
import { api, controlEvents, Session } from './api.js'
import { age, errorBox, h, stateBadge } from './dom.js'
import { terminal } from './terminal.js'

export function sandboxPage(id, { go, cleanup, events }) {
  const err = errorBox()
  const info = h('div', { class: 'kv' })
  const actions = h('div', { class: 'row' })
  const panel = h('div', { class: 'panel' })
  const tabs = h('div', { class: 'tabs', role: 'tablist' })
  let sb = null
  let session = null
  let stopPanel = () => {}
  // Its state as the event stream tells it (a pause or resume takes a while).
  const onEvent = ({ event, data }) => {
    if (event === 'sandbox.state' && data?.id === id) refresh().catch((e) => err.show(e))
  }
  events.listeners.add(onEvent)
  cleanup(() => {
    stopPanel()
    events.listeners.delete(onEvent)
  })

  const sessionOf = async () => (session ??= await Session.open(id))

  const act = (label, fn, cls) =>
    h('button', {
      type: 'button',
      class: cls,
      'data-action': label.toLowerCase(),
      onclick: async () => {
        err.show(null)
        try {
          await fn()
          await refresh()
        } catch (e) {
          err.show(e)
        }
      },
    }, label)

  const path = `/v1/sandboxes/${encodeURIComponent(id)}`
  actions.append(
    act('Pause', () => api('POST', `${path}:pause`, {})),
    act('Resume', () => api('POST', `${path}:resume`, {})),
    act('Fork', async () => {
      const r = await api('POST', `${path}:fork`, {})
      const copy = r.sandboxes?.[0]?.id
      if (copy) go(`#/sandbox/${copy}`)
    }),
    act('Extend', () => {
      const s = prompt('Idle timeout from now, in seconds', '3600')
      if (s) return api('POST', `${path}:extend`, { timeout: Number(s) })
    }),
    act('Delete', async () => {
      if (!confirm(`Delete sandbox ${id}?`)) return
      await api('DELETE', path)
      go('#/')
    }, 'danger'),
  )

  async function refresh() {
    sb = await api('GET', path)
    const rows = [
      ['State', stateBadge(sb.state)],
      ['Template', sb.template],
      ['CPUs', sb.vcpus],
      ['Memory', `${sb.memory_mib} MiB`],
      ['Disk', sb.disk_mib ? `${sb.disk_mib} MiB` : '—'],
      ['Age', age(sb.created_at)],
      ['Idle timeout', sb.timeout ? `${sb.timeout}s` : 'none'],
      ['Expires', sb.expires_at ?? '—'],
    ]
    if (sb.error) rows.push(['Error', sb.error])
    info.replaceChildren(...rows.flatMap(([k, v]) => [h('span', { class: 'muted' }, k), h('span', {}, v)]))
  }

  const views = {
    Terminal: () => {
      const holder = h('div', {}, 'opening a session…')
      let stopped = false
      stopPanel = () => (stopped = true)
      sessionOf()
        .then((s) => {
          if (stopped) return
          const live = terminal(s)
          holder.replaceChildren(live.el)
          live.start()
          stopPanel = live.stop
        })
        .catch((e) => holder.replaceChildren(h('div', { class: 'error' }, e.message)))
      return holder
    },
    Files: () => filesPanel(sessionOf),
    Logs: () => {
      const pre = h('pre', { class: 'log', 'aria-label': 'sandbox log' })
      const abort = new AbortController()
      stopPanel = () => abort.abort()
      controlEvents(`${path}/logs?follow=true`, {
        signal: abort.signal,
        onEvent: ({ data }) => {
          pre.append(logLine(data) + '\n')
          pre.scrollTop = pre.scrollHeight
        },
      }).catch((e) => {
        if (!abort.signal.aborted) pre.append(`(${e.message})\n`)
      })
      return pre
    },
    Metrics: () => metricsPanel(id, sessionOf),
  }
  const show = (name) => {
    stopPanel()
    stopPanel = () => {}
    for (const b of tabs.children) b.setAttribute('aria-selected', String(b.textContent === name))
    panel.replaceChildren(views[name]())
  }
  tabs.append(...Object.keys(views).map((name) => h('button', { type: 'button', role: 'tab', onclick: () => show(name) }, name)))

  refresh().then(() => show(sb.state === 'running' ? 'Terminal' : 'Logs'), (e) => err.show(e))
  return h('section', {}, h('h1', {}, `Sandbox ${id}`), err, info, actions, tabs, panel)
}

function logLine(e) {
  const d = e.data ?? {}
  if (e.kind === 'command') {
    const cmd = (d.argv ?? []).join(' ')
    const end = d.phase === 'exit' ? ` → ${d.signal ? `signal ${d.signal}` : `exit ${d.exit_code}`} in ${d.duration_ms} ms` : ''
    return `${e.time} command ${d.phase} [${d.who}] ${d.user ?? ''} $ ${cmd}${end}`
  }
  const extra = Object.entries(d).filter(([k]) => k !== 'event').map(([k, v]) => `${k}=${typeof v === 'object' ? JSON.stringify(v) : v}`)
  return `${e.time} ${e.kind} ${d.event ?? ''} ${extra.join(' ')}`
}

// Browse, upload to and download from the sandbox's filesystem.
function filesPanel(sessionOf) {
  const err = errorBox()
  const where = h('input', { value: '/tmp', 'aria-label': 'directory', size: 40 })
  const list = h('tbody')
  const upload = h('input', { type: 'file', 'aria-label': 'upload' })
  const join = (dir, name) => `${dir.replace(/\/+$/, '')}/${name}`

  async function load() {
    err.show(null)
    try {
      const s = await sessionOf()
      const r = await s.json('GET', `/v1/files/list?path=${encodeURIComponent(where.value)}`)
      list.replaceChildren(
        h('tr', {}, h('td', {}, h('a', { href: '#', onclick: (ev) => { ev.preventDefault(); up() } }, '..')), h('td'), h('td'), h('td')),
        ...r.entries
          .sort((a, b) => (a.type === 'dir') !== (b.type === 'dir') ? (a.type === 'dir' ? -1 : 1) : a.name.localeCompare(b.name))
          .map((f) => h('tr', { 'data-file': f.name },
            h('td', {}, f.type === 'dir'
              ? h('a', { href: '#', onclick: (ev) => { ev.preventDefault(); where.value = join(where.value, f.name); load() } }, `${f.name}/`)
              : f.name),
            h('td', {}, f.type),
            h('td', {}, f.type === 'file' ? f.size : ''),
            h('td', {}, f.type === 'file' ? h('button', { type: 'button', onclick: () => download(join(where.value, f.name), f.name) }, 'Download') : ''))))
    } catch (e) {
      err.show(e)
    }
  }
  function up() {
    where.value = where.value.replace(/\/+$/, '').replace(/\/[^/]*$/, '') || '/'
    load()
  }
  async function download(p, name) {
    try {
      const s = await sessionOf()
      const blob = await (await s.fetch('GET', `/v1/files?path=${encodeURIComponent(p)}`)).blob()
      const a = h('a', { href: URL.createObjectURL(blob), download: name })
      document.body.append(a)
      a.click()
      a.remove()
      setTimeout(() => URL.revokeObjectURL(a.href), 10_000)
    } catch (e) {
      err.show(e)
    }
  }
  async function send() {
    const f = upload.files[0]
    if (!f) return
    try {
      const s = await sessionOf()
      await s.fetch('PUT', `/v1/files?path=${encodeURIComponent(join(where.value, f.name))}`, {
        body: f,
        headers: { 'Content-Type': 'application/octet-stream' },
      })
      upload.value = ''
      await load()
    } catch (e) {
      err.show(e)
    }
  }
  load()
  return h('div', {},
    h('div', { class: 'row' }, where, h('button', { type: 'button', onclick: load }, 'List'),
      upload, h('button', { type: 'button', class: 'primary', onclick: send }, 'Upload')),
    err,
    h('table', {}, h('thead', {}, h('tr', {}, h('th', {}, 'Name'), h('th', {}, 'Type'), h('th', {}, 'Size'), h('th'))), list))
}

// What its node measures (GET /v1/sandboxes/{id}/metrics), and what the
// guest says of itself, on request: one command through the data plane
// (so it shows in the sandbox's log like any other).
function metricsPanel(id, sessionOf) {
  const host = h('pre', { class: 'log', id: 'host-metrics' })
  const pre = h('pre', { class: 'log' })
  const mib = (b) => (b / 1048576).toFixed(1)
  async function load() {
    host.textContent = 'asking its node…'
    pre.textContent = 'asking the guest…'
    try {
      const m = await api('GET', `/v1/sandboxes/${id}/metrics`)
      host.textContent = `measured on its node at ${new Date(m.timestamp).toLocaleTimeString()}:\n` +
        `CPU ${m.cpu_used_pct.toFixed(1)}% of ${m.cpu_count} vCPU(s) since the previous sample\n` +
        `memory ${mib(m.mem_used_bytes)} MiB resident of ${mib(m.mem_total_bytes)} MiB\n` +
        `disk ${mib(m.disk_used_bytes)} MiB written of ${mib(m.disk_total_bytes)} MiB`
    } catch (e) {
      host.textContent = e.message
    }
    try {
      const s = await sessionOf()
      let out = ''
      await s.events('POST', '/v1/exec', { cmd: ['/bin/sh', '-c', 'cat /proc/loadavg; echo; free -k 2>/dev/null || head -3 /proc/meminfo; echo; df -k / /tmp'] }, {
        onEvent: ({ event, data }) => {
          if (event === 'stdout' || event === 'stderr') out += new TextDecoder().decode(Uint8Array.from(atob(data.data), (c) => c.charCodeAt(0)))
        },
      })
      const procs = await s.json('GET', '/v1/processes')
      pre.textContent = `load average (1, 5, 15 min), runnable/all, last pid:\n${out}\nprocesses the agent runs: ${procs.processes.length}`
    } catch (e) {
      pre.textContent = e.message
    }
  }
  load()
  return h('div', {}, h('div', { class: 'row' }, h('button', { type: 'button', onclick: load }, 'Refresh')),
    h('h3', {}, 'Its VM, from the host'), host, h('h3', {}, 'The guest'), pre)
}
