// The public API, as any client calls it: the control plane at this origin
// with the API key, the data plane with a session token. The data plane is
// reached through vesseld's relay at /console/data/ (the page's policy
// allows its own origin only); the requests are the data plane's own.

const KEY = 'vessel.key'
// The tab's session storage only: the key is gone when the tab closes and
// is never written to disk by us (no localStorage, no cookie).
export const key = () => sessionStorage.getItem(KEY)
export const setKey = (k) => sessionStorage.setItem(KEY, k)
export const clearKey = () => sessionStorage.removeItem(KEY)

export class ApiError extends Error {
  constructor(status, body) {
    super(body?.message ? `${body.message} (${status})` : `HTTP ${status}`)
    this.status = status
    this.code = body?.code
  }
}

async function check(r) {
  if (r.ok) return r
  let body = null
  try {
    body = await r.json()
  } catch {}
  throw new ApiError(r.status, body)
}

// A control-plane call: JSON in, JSON (or nothing) out.
export async function api(method, path, body) {
  const headers = { Authorization: `Bearer ${key()}` }
  if (body !== undefined) headers['Content-Type'] = 'application/json'
  const r = await check(await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) }))
  if (r.status === 204) return null
  const type = r.headers.get('Content-Type') ?? ''
  return type.includes('json') ? r.json() : r.text()
}

// Server-Sent Events over fetch (EventSource cannot send Authorization):
// calls onEvent({id, event, data}) for each, until the stream ends or
// `signal` aborts. `data` is parsed JSON when it parses.
export async function sse(path, { headers = {}, method = 'GET', body, signal, onEvent }) {
  const r = await check(await fetch(path, { method, headers, body, signal }))
  const reader = r.body.pipeThrough(new TextDecoderStream()).getReader()
  let buf = ''
  let ev = { event: 'message', data: '' }
  for (;;) {
    const { value, done } = await reader.read()
    if (done) return
    buf += value
    let nl
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl).replace(/\r$/, '')
      buf = buf.slice(nl + 1)
      if (line === '') {
        if (ev.data !== '') {
          let data = ev.data
          try {
            data = JSON.parse(data)
          } catch {}
          onEvent({ ...ev, data })
        }
        ev = { event: 'message', data: '' }
      } else if (line.startsWith(':')) {
        // a keepalive comment
      } else {
        const colon = line.indexOf(':')
        const field = colon < 0 ? line : line.slice(0, colon)
        const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '')
        if (field === 'data') ev.data += (ev.data ? '\n' : '') + value
        else if (field === 'event') ev.event = value
        else if (field === 'id') ev.id = value
      }
    }
  }
}

// The control plane's SSE with the API key.
export const controlEvents = (path, opts) => sse(path, { ...opts, headers: { Authorization: `Bearer ${key()}` } })

// A data-plane session of one sandbox: its token, and calls with it.
export class Session {
  static async open(sandboxId) {
    const s = await api('POST', `/v1/sandboxes/${encodeURIComponent(sandboxId)}/sessions`, {})
    return new Session(s.token)
  }
  constructor(token) {
    this.token = token
  }
  url(path) {
    return `/console/data${path}`
  }
  async fetch(method, path, { body, headers = {} } = {}) {
    return check(await fetch(this.url(path), { method, body, headers: { Authorization: `Bearer ${this.token}`, ...headers } }))
  }
  async json(method, path, body) {
    const r = await this.fetch(method, path, {
      body: body === undefined ? undefined : JSON.stringify(body),
      headers: body === undefined ? {} : { 'Content-Type': 'application/json' },
    })
    return r.status === 204 ? null : r.json()
  }
  events(method, path, body, opts) {
    return sse(this.url(path), {
      ...opts,
      method,
      body: JSON.stringify(body),
      headers: { Authorization: `Bearer ${this.token}`, 'Content-Type': 'application/json' },
    })
  }
}

// base64 of the data plane's output into bytes.
export function fromBase64(s) {
  const bin = atob(s)
  const out = new Uint8Array(bin.length)
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i)
  return out
}
