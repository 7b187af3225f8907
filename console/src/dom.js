// Elements built from data, never from HTML strings: what the API returns
// (names, log lines, file names) is always text, so nothing a sandbox
// writes can become markup in the page.
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag)
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v)
    else if (k === 'class') el.className = v
    else el.setAttribute(k, v === true ? '' : String(v))
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue
    el.append(c instanceof Node ? c : document.createTextNode(String(c)))
  }
  return el
}

export function age(iso) {
  const s = Math.max(0, Math.round((Date.now() - Date.parse(iso)) / 1000))
  if (s < 60) return `${s}s`
  if (s < 3600) return `${Math.floor(s / 60)}m`
  if (s < 86400) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`
  return `${Math.floor(s / 86400)}d`
}

export const stateBadge = (state) => h('span', { class: `state state-${state}` }, state)

// A place for an error message that a view shows beside what failed.
export function errorBox() {
  const el = h('div', { class: 'error', role: 'alert' })
  el.show = (e) => {
    el.textContent = e ? String(e.message ?? e) : ''
  }
  return el
}
