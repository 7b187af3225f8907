// Templates: the tenant's usable ones, a build from a build spec, and the
// builds' progress and logs as the tenant's events carry them
// (template.progress, template.log, template.built).
import { api, controlEvents } from './api.js'
import { age, errorBox, h } from './dom.js'

const EXAMPLE = JSON.stringify({ name: 'my-template', base: 'minimal', commands: ['echo built > /etc/motd'] }, null, 2)

export function templatesPage({ cleanup, events }) {
  const err = errorBox()
  const body = h('tbody')
  const spec = h('textarea', { 'aria-label': 'build spec', spellcheck: 'false' })
  spec.value = EXAMPLE
  const builds = h('div')
  const load = async () => {
    try {
      const r = await api('GET', '/v1/templates')
      body.replaceChildren(...r.templates.map((t) =>
        h('tr', {}, h('td', {}, t.name), h('td', {}, t.version), h('td', {}, t.vcpus), h('td', {}, `${t.memory_mib} MiB`),
          h('td', {}, t.builtin ? 'built in' : 'yours'), h('td', {}, age(t.created_at)))))
    } catch (e) {
      err.show(e)
    }
  }
  const renderBuilds = () =>
    builds.replaceChildren(...[...events.builds.entries()].reverse().map(([name, b]) =>
      h('details', { open: true }, h('summary', {}, `${name}: ${b.state}`),
        h('pre', { class: 'log' }, b.lines.join('\n') || '(no log lines: a build without steps logs none)'))))
  const onEvent = ({ event }) => {
    if (event.startsWith('template.')) renderBuilds()
    if (event === 'template.built') load()
  }
  events.listeners.add(onEvent)
  cleanup(() => events.listeners.delete(onEvent))
  const build = async () => {
    err.show(null)
    try {
      const r = await api('POST', '/v1/templates', JSON.parse(spec.value))
      events.builds.set(r.template.name, { state: 'queued', lines: [] })
      renderBuilds()
      // Its operation's end, failure included (a failed build has no template.built).
      controlEvents(`/v1/operations/${r.operation.id}/events`, {
        onEvent: ({ event, data }) => {
          const b = events.builds.get(r.template.name)
          if (event === 'operation.failed') b.state = `failed: ${data.error?.message ?? ''}`
          if (event === 'operation.done') b.state = b.state.startsWith('built') ? b.state : 'done'
          renderBuilds()
        },
      }).catch((e) => err.show(e))
    } catch (e) {
      err.show(e)
    }
  }
  load()
  renderBuilds()
  return h('section', {},
    h('h1', {}, 'Templates'),
    err,
    h('table', {}, h('thead', {}, h('tr', {}, ...['Name', 'Version', 'CPUs', 'Memory', 'Kind', 'Age'].map((t) => h('th', {}, t)))), body),
    h('h2', {}, 'Build a template'),
    spec,
    h('div', { class: 'row' }, h('button', { type: 'button', class: 'primary', onclick: build }, 'Build')),
    h('h2', {}, 'Builds'),
    builds)
}
