// Sandbox ports through E2B's own JS SDK (e2b 2.45.0, pinned): a server in
// a `base` sandbox reached at `sandbox.getHost(port)` on the envd listener,
// over http and over https with Vessel's ingress CA, the traffic token of
// allowPublicTraffic: false, maskRequestHost, and E2B's 502 once the
// sandbox is gone. Ports go through the sandbox's agent, not its network
// (the one with allowInternetAccess false has an egress allowlist of nothing).
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import https from 'node:https'
import path from 'node:path'
import { Sandbox } from 'e2b'
import { Vesseld } from './vesseld.mjs'

let d
let pub // allowPublicTraffic (default)
let priv // allowPublicTraffic false, maskRequestHost

before(async () => {
  d = await new Vesseld({ templates: ['minimal', 'base'], rest: true, envd: true }).start()
  process.env.E2B_SANDBOX_URL = d.envdUrl
  ;[pub, priv] = await Promise.all([
    Sandbox.create('base', d.opts()),
    Sandbox.create('base', {
      ...d.opts(),
      allowInternetAccess: false,
      network: { allowPublicTraffic: false, maskRequestHost: 'custom-host.example.com:${PORT}' },
    }),
  ])
})

after(async () => {
  await Promise.allSettled([pub?.kill(), priv?.kill()])
  await d?.stop()
})

// GET over https trusting only the ingress CA (what NODE_EXTRA_CA_CERTS
// gives fetch in a process started with it).
function httpsGet(url, ca, headers = {}) {
  return new Promise((resolve, reject) => {
    https
      .get(url, { ca, headers }, (res) => {
        let body = ''
        res.on('data', (c) => (body += c))
        res.on('end', () => resolve({ status: res.statusCode, body }))
      })
      .on('error', reject)
  })
}

// Fetches until the server in the sandbox answers (it starts in the
// background), at most 60 s.
async function untilServed(url, init = {}) {
  const deadline = Date.now() + 60_000
  for (;;) {
    const r = await fetch(url, init)
    if (r.status !== 502 || Date.now() > deadline) return r
    await r.arrayBuffer()
    await new Promise((res) => setTimeout(res, 250))
  }
}

test('a server in the sandbox at getHost(port), over http and https', async () => {
  assert.match(pub.getHost(8000), new RegExp(`^8000-${pub.sandboxId}\\.vessel\\.localhost:\\d+$`))
  await pub.files.write('/home/user/www/hello.txt', 'hello from the sandbox')
  await pub.commands.run('cd /home/user/www && python3 -m http.server 8000', { background: true })
  const r = await untilServed(`http://${pub.getHost(8000)}/hello.txt`)
  assert.equal(r.status, 200)
  assert.equal(await r.text(), 'hello from the sandbox')
  const ca = fs.readFileSync(path.join(d.stateDir, 'ingress-ca.pem'))
  const s = await httpsGet(`https://${pub.getHost(8000)}/hello.txt`, ca)
  assert.equal(s.status, 200)
  assert.equal(s.body, 'hello from the sandbox')
  // Nothing listens on another port: E2B's 502, saying so.
  const closed = await fetch(`http://${pub.getHost(8001)}/`)
  assert.equal(closed.status, 502)
  assert.match((await closed.json()).message, /port 8001 is not open/)
})

test('allowPublicTraffic false asks for the traffic token; maskRequestHost', async () => {
  assert.ok(priv.trafficAccessToken)
  assert.equal(pub.trafficAccessToken, undefined)
  // A server that writes the request's headers to a file.
  await priv.commands.run(
    `python3 -c "
import http.server
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        open('/tmp/headers.txt', 'w').write(str(self.headers))
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b'ok')
    def log_message(self, *a): pass
http.server.HTTPServer(('', 8080), H).serve_forever()
"`,
    { background: true },
  )
  const url = `http://${priv.getHost(8080)}/`
  const token = { headers: { 'e2b-traffic-access-token': priv.trafficAccessToken } }
  const ok = await untilServed(url, token)
  assert.equal(ok.status, 200)
  assert.equal(await ok.text(), 'ok')
  const denied = await fetch(url)
  assert.equal(denied.status, 403)
  const wrong = await fetch(url, { headers: { 'e2b-traffic-access-token': 'x' } })
  assert.equal(wrong.status, 403)
  const seen = await priv.files.read('/tmp/headers.txt')
  assert.match(seen, /^Host: custom-host\.example\.com:8080$/m)
  assert.doesNotMatch(seen, /e2b-traffic-access-token/i)
  // The settings come back with the sandbox.
  const info = await Sandbox.getInfo(priv.sandboxId, d.opts())
  assert.equal(info.sandboxDomain, priv.sandboxDomain)
})

test('a fork of a private sandbox keeps its private ports and masked Host', async () => {
  // priv's server (the test above) runs on in the copy: a fork copies memory.
  const [copy] = await priv.fork({ count: 1 })
  assert.ok(copy instanceof Sandbox, String(copy))
  try {
    assert.ok(copy.trafficAccessToken)
    assert.notEqual(copy.trafficAccessToken, priv.trafficAccessToken)
    const url = `http://${copy.getHost(8080)}/`
    const ok = await untilServed(url, { headers: { 'e2b-traffic-access-token': copy.trafficAccessToken } })
    assert.equal(ok.status, 200)
    await ok.arrayBuffer()
    const denied = await fetch(url)
    assert.equal(denied.status, 403)
    await denied.arrayBuffer()
    const parents = await fetch(url, { headers: { 'e2b-traffic-access-token': priv.trafficAccessToken } })
    assert.equal(parents.status, 403)
    await parents.arrayBuffer()
    assert.match(await copy.files.read('/tmp/headers.txt'), /^Host: custom-host\.example\.com:8080$/m)
  } finally {
    await copy.kill()
  }
})

test('a killed sandbox is E2B 502 "The sandbox was not found"', async () => {
  const host = priv.getHost(8080)
  await priv.kill()
  const r = await fetch(`http://${host}/`)
  assert.equal(r.status, 502)
  const body = await r.json()
  assert.equal(body.message, 'The sandbox was not found')
  assert.equal(body.sandboxId, priv.sandboxId)
  assert.equal(body.code, 502)
})
