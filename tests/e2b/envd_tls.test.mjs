// E2B's own SDK to envd over https:// with TLS on every listener (vesseld
// --tls-self-signed), a real guest behind it: commands and files through
// E2B_SANDBOX_URL=https://..., and through the SDK's own envd address
// (https://49983-<id>.<sandbox domain>, the ingress CA's certificate). The
// SDK trusts the listener CA and the ingress CA (NODE_EXTRA_CA_CERTS, a
// bundle of both, read by Node once at start: each case runs in a node
// process of its own). The envd listener refuses plain HTTP, and a client
// trusting another CA refuses it.
import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import fs from 'node:fs'
import https from 'node:https'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { Vesseld } from './vesseld.mjs'

const here = path.dirname(fileURLToPath(import.meta.url))
const d = new Vesseld({ templates: ['minimal', 'base'], envd: true, tls: true, egress: true })
let bundle

before(async () => {
  await d.start()
  bundle = path.join(d.root, 'trusted.pem')
  fs.writeFileSync(
    bundle,
    fs.readFileSync(d.caPath, 'utf8') + fs.readFileSync(path.join(d.stateDir, 'ingress-ca.pem'), 'utf8'),
  )
})

after(async () => {
  await d.stop()
})

// A sandbox of `base` made by the SDK in a fresh node with `env` added: a
// command's output, a file written and read back, then the sandbox killed.
function sdkRoundTrip(env) {
  const script = `import { Sandbox } from 'e2b'
const out = {}
let sb
try {
  sb = await Sandbox.create('base', { requestTimeoutMs: 600000 })
  out.stdout = (await sb.commands.run('echo envd-over-tls')).stdout
  await sb.files.write('/tmp/tls.txt', 'written over https')
  out.file = await sb.files.read('/tmp/tls.txt')
  out.ok = true
} catch (e) {
  const cause = e?.cause ?? {}
  out.ok = false
  out.error = String(e) + ' ' + String(cause.code ?? cause)
}
try { await sb?.kill() } catch {}
console.log(JSON.stringify(out))`
  const base = { ...process.env, E2B_API_URL: d.apiUrl, E2B_API_KEY: d.key, NODE_EXTRA_CA_CERTS: bundle }
  delete base.E2B_SANDBOX_URL
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      ['--input-type=module', '-e', script],
      { cwd: here, env: { ...base, ...env }, timeout: 600_000 },
      (err, stdout, stderr) => {
        if (err) return reject(new Error(`${err.message}\n${stderr}\n${d.log()}`))
        resolve(JSON.parse(stdout.trim().split('\n').pop()))
      },
    )
  })
}

// GET envd's /health over https trusting only `ca`: the status, or the error.
function health(ca) {
  return new Promise((resolve) => {
    https
      .get(`${d.envdUrl}/health`, { ca }, (res) => {
        res.resume()
        resolve({ status: res.statusCode })
      })
      .on('error', (e) => resolve({ error: String(e.code ?? e) }))
  })
}

test('commands and files through E2B_SANDBOX_URL=https://', async () => {
  assert.match(d.envdUrl, /^https:\/\//)
  const r = await sdkRoundTrip({ E2B_SANDBOX_URL: d.envdUrl })
  assert.equal(r.ok, true, JSON.stringify(r))
  assert.equal(r.stdout, 'envd-over-tls\n')
  assert.equal(r.file, 'written over https')
})

test("commands and files through the SDK's own https:// envd address", async () => {
  const r = await sdkRoundTrip({})
  assert.equal(r.ok, true, JSON.stringify(r))
  assert.equal(r.stdout, 'envd-over-tls\n')
  assert.equal(r.file, 'written over https')
})

test('the envd listener is TLS only and verified against its CA', async () => {
  const listenerCa = fs.readFileSync(d.caPath)
  // No sandbox named: envd's own 502, over a verified connection.
  assert.deepEqual(await health(listenerCa), { status: 502 })
  const ingressOnly = fs.readFileSync(path.join(d.stateDir, 'ingress-ca.pem'))
  const wrong = await health(ingressOnly)
  assert.ok(wrong.error, JSON.stringify(wrong))
  assert.match(wrong.error, /CERT|certificate|SIGNATURE|verify/i)
  const plain = await fetch(d.envdUrl.replace('https://', 'http://') + '/health').then(
    (r) => ({ status: r.status }),
    (e) => ({ error: String(e) }),
  )
  assert.ok(plain.error, JSON.stringify(plain))
})
