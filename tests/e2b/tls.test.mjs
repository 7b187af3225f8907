// E2B's own SDK over https:// to Vessel's E2B REST listener (vesseld
// --tls-self-signed), trusting vesseld's CA through NODE_EXTRA_CA_CERTS as
// docs/e2b.md says, and refusing the server without it. Node reads
// NODE_EXTRA_CA_CERTS once, at start, and the CA is made by vesseld: each
// case runs the SDK in a node process of its own. No guest is created.
import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { Vesseld } from './vesseld.mjs'

const here = path.dirname(fileURLToPath(import.meta.url))
const d = new Vesseld({ templates: ['minimal'], tls: true, egress: false })

before(async () => {
  await d.start()
})

after(async () => {
  await d.stop()
})

// Sandbox.list() in a fresh node with `env` added: {ok, n} or {ok: false, error}.
function listWith(env) {
  const script = `import { Sandbox } from 'e2b'
try {
  const items = await Sandbox.list().nextItems()
  console.log(JSON.stringify({ ok: true, n: items.length }))
} catch (e) {
  const cause = e?.cause ?? {}
  console.log(JSON.stringify({ ok: false, error: String(e) + ' ' + String(cause.code ?? cause) }))
}`
  const base = { ...process.env, E2B_API_URL: d.apiUrl, E2B_API_KEY: d.key }
  delete base.NODE_EXTRA_CA_CERTS
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      ['--input-type=module', '-e', script],
      { cwd: here, env: { ...base, ...env }, timeout: 120_000 },
      (err, stdout, stderr) => {
        if (err) return reject(new Error(`${err.message}\n${stderr}`))
        resolve(JSON.parse(stdout.trim().split('\n').pop()))
      },
    )
  })
}

test('the REST listener speaks https:// and the SDK verifies it with NODE_EXTRA_CA_CERTS', async () => {
  assert.match(d.apiUrl, /^https:\/\//)
  const r = await listWith({ NODE_EXTRA_CA_CERTS: d.caPath })
  assert.deepEqual(r, { ok: true, n: 0 }, JSON.stringify(r))
})

test('without the CA the SDK refuses the server', async () => {
  const r = await listWith({})
  assert.equal(r.ok, false)
  assert.match(r.error, /CERT|certificate/i, r.error)
})

test('plain http:// to the TLS listener gets no E2B answer', async () => {
  const r = await listWith({ E2B_API_URL: d.apiUrl.replace('https://', 'http://') })
  assert.equal(r.ok, false, JSON.stringify(r))
})
