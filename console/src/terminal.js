// A terminal in a sandbox: xterm.js over the data plane's pty. POST
// /v1/exec with a pty and stdin kept open streams the shell's output as
// SSE; keystrokes go to /v1/processes/{pid}/stdin, one request at a time
// so that they arrive in order; the window size to .../resize. Closing the
// page ends the stream, and the data plane kills the shell.
import { fromBase64 } from './api.js'
import { h } from './dom.js'

// xterm.js's DOM renderer writes the styles it computes (theme colours,
// cell sizes) into <style> elements, which this page's policy refuses
// (style-src 'self': no inline style, not even an empty element). It gets
// an inert <template> in their place, whose text goes into a constructed
// stylesheet, this script's own: the terminal is styled without loosening
// the policy for everything else.
function styleSheetsForXterm() {
  if (document.vesselStyleShim) return
  document.vesselStyleShim = true
  const create = Document.prototype.createElement
  document.createElement = function (tag, options) {
    if (String(tag).toLowerCase() !== 'style') return create.call(this, tag, options)
    const el = create.call(this, 'template')
    const sheet = new CSSStyleSheet()
    document.adoptedStyleSheets = [...document.adoptedStyleSheets, sheet]
    Object.defineProperty(el, 'textContent', { get: () => '', set: (css) => sheet.replaceSync(css) })
    const remove = el.remove.bind(el)
    el.remove = () => {
      document.adoptedStyleSheets = document.adoptedStyleSheets.filter((s) => s !== sheet)
      remove()
    }
    return el
  }
}

export function terminal(session, onEnd) {
  if (!window.Terminal) {
    const missing = h('div', { class: 'error' }, 'This build has no xterm.js (scripts/setup.sh installs it; make build copies it).')
    return { el: missing, start() {}, stop() {} }
  }
  styleSheetsForXterm()
  const el = h('div', { id: 'terminal' })
  const status = h('div', { class: 'muted' }, 'starting a shell…')
  const term = new window.Terminal({ convertEol: false, cursorBlink: true, fontSize: 13, rows: 20, cols: 90 })
  const abort = new AbortController()
  let pid = null
  let queue = Promise.resolve()
  const send = (path, body) => {
    queue = queue.then(() => session.fetch('POST', `/v1/processes/${pid}/${path}`, body).catch((e) => {
      status.textContent = `input: ${e.message}`
    }))
  }
  term.onData((d) => {
    if (pid !== null) send('stdin', { body: d })
  })
  term.onResize(({ rows, cols }) => {
    if (pid !== null)
      send('resize', { body: JSON.stringify({ rows, cols }), headers: { 'Content-Type': 'application/json' } })
  })
  const start = () => {
    term.open(el)
    term.focus()
    session
      .events('POST', '/v1/exec', { cmd: ['/bin/sh', '-l'], pty: { rows: term.rows, cols: term.cols }, stdin: true }, {
        signal: abort.signal,
        onEvent: ({ event, data }) => {
          if (event === 'start') {
            pid = data.pid
            status.textContent = `shell pid ${pid}`
          } else if (event === 'stdout' || event === 'stderr') {
            term.write(fromBase64(data.data))
          } else if (event === 'exit') {
            status.textContent = `shell exited (${data.exit_code})`
            pid = null
          } else if (event === 'error') {
            status.textContent = `shell ended: ${data.message}`
            pid = null
          }
        },
      })
      .catch((e) => {
        if (!abort.signal.aborted) status.textContent = `terminal: ${e.message}`
      })
      .finally(() => onEnd?.())
  }
  return { el: h('div', {}, el, status), start, stop: () => abort.abort(), term }
}
