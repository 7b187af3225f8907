// A real vesseld for the E2B SDK tests and bench/e2b: scratch state and
// cache, free ports for every listener, and the built-in templates this
// build made linked in from the template store `make build` filled
// (VESSEL_TEMPLATE_STORE). Stopped with SIGTERM (--stop-vms-on-exit: no VM
// outlives the test).
//
// Options: templates (built-in names to link), rest / envd (start E2B's
// REST front end / envd), egress (the gateway in a private namespace, or
// --no-egress), warmPool (vesseld --warm-pool), tls (every listener
// https:// with vesseld's own CA, --tls-self-signed; its certificate at
// caPath), args (more flags).
//
// URLs: apiUrl is E2B's REST API, vesselUrl Vessel's own, envdUrl envd.
// Keys: key is the development tenant's key in its e2b_ form, vesselKey the
// same tenant's native key.
import { spawn, execFileSync } from 'node:child_process'
import crypto from 'node:crypto'
import fs from 'node:fs'
import https from 'node:https'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..')

function need(name) {
  const v = process.env[name]
  if (!v) throw new Error(`${name} is not set; run through \`make test\` (ctest sets it)`)
  return v
}

async function freePort() {
  return await new Promise((resolve, reject) => {
    const s = net.createServer()
    s.on('error', reject)
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address()
      s.close(() => resolve(port))
    })
  })
}

// Links the version of built-in template `name` that this build made into
// `cache`/templates. The store is a cache shared by checkouts and vesseld
// takes a template's newest version, which may be another checkout's (with
// another agent); `vessel template build` names ours (cached: it only
// hashes the inputs). Hard links where the store and the scratch dir share
// a filesystem, else a copy.
function linkTemplate(cache, name) {
  const store = need('VESSEL_TEMPLATE_STORE')
  const out = execFileSync(
    need('VESSEL_CLI_PATH'),
    ['template', 'build', '--local', '-f', path.join(repo, 'guest/templates', name, 'template.json'), '--store', store],
    { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] },
  )
  const version = out.trim().split('\n').pop().split('@')[1]
  if (!version) throw new Error(`template ${name}: no version in ${JSON.stringify(out)}`)
  const dest = path.join(cache, 'templates', name)
  fs.mkdirSync(dest, { recursive: true })
  try {
    execFileSync('cp', ['-al', path.join(store, name, version), dest])
  } catch {
    execFileSync('cp', ['-a', path.join(store, name, version), dest])
  }
}

export class Vesseld {
  constructor({
    templates = ['minimal', 'base'],
    rest = true,
    envd = false,
    egress = true,
    warmPool = 'none',
    tls = false,
    args = [],
  } = {}) {
    this.options = { templates, rest, envd, egress, warmPool, tls, args }
  }

  async start() {
    const o = this.options
    this.root = fs.mkdtempSync(path.join(os.tmpdir(), 'vessel-e2b-'))
    const cache = path.join(this.root, 'cache')
    for (const t of o.templates) linkTemplate(cache, t)
    this.stateDir = path.join(this.root, 'state')
    const [api, data, e2b, envd] = [await freePort(), await freePort(), await freePort(), await freePort()]
    const scheme = o.tls ? 'https' : 'http'
    this.vesselUrl = `${scheme}://127.0.0.1:${api}`
    this.apiUrl = o.rest ? `${scheme}://127.0.0.1:${e2b}` : undefined
    this.envdUrl = o.envd ? `${scheme}://127.0.0.1:${envd}` : undefined
    this.caPath = o.tls ? path.join(this.root, 'tls-ca.pem') : undefined
    this.logPath = path.join(this.root, 'vesseld.log')
    this.argv = [
      '--state-dir', this.stateDir, '--cache-dir', cache,
      '--listen', `127.0.0.1:${api}`, '--data-listen', `127.0.0.1:${data}`,
      '--e2b-listen', o.rest ? `127.0.0.1:${e2b}` : '',
      '--e2b-envd-listen', o.envd ? `127.0.0.1:${envd}` : '',
      '--kernel', need('VESSEL_KERNEL'), '--minimal-image', need('VESSEL_MINIMAL_IMAGE'),
      '--accel', 'tcg', '--warm-pool', o.warmPool, '--stop-vms-on-exit',
      ...(o.egress ? [] : ['--no-egress']),
      ...(o.tls ? ['--tls-self-signed', '--tls-name', '127.0.0.1', '--tls-ca-out', this.caPath] : []),
      ...o.args,
      ...(process.env.VESSEL_E2B_TEST_ARGS ?? '').split(' ').filter(Boolean),
    ]
    await this.spawn()
    const e2bKey = path.join(this.stateDir, 'dev-e2b-api-key')
    this.key = fs.existsSync(e2bKey) ? fs.readFileSync(e2bKey, 'utf8').trim() : undefined
    this.vesselKey = fs.readFileSync(path.join(this.stateDir, 'dev-api-key'), 'utf8').trim()
    return this
  }

  // Starts vesseld (again) with the same state, ports and flags, and waits
  // until it answers.
  async spawn() {
    const log = fs.openSync(this.logPath, 'a')
    this.proc = spawn(need('VESSELD_PATH'), this.argv, { stdio: ['ignore', log, log] })
    fs.closeSync(log)
    this.exited = new Promise((resolve) => this.proc.on('exit', (code, sig) => resolve({ code, sig })))
    const deadline = Date.now() + 300_000
    for (;;) {
      if (this.proc.exitCode !== null) throw new Error(`vesseld exited:\n${this.log()}`)
      try {
        if (await this.healthy()) break
      } catch {}
      if (Date.now() > deadline) throw new Error(`vesseld did not come up:\n${this.log()}`)
      await new Promise((r) => setTimeout(r, 200))
    }
  }

  // GET /healthz answers 200 (over https://, trusting vesseld's CA: this
  // process started before the CA existed, so NODE_EXTRA_CA_CERTS cannot).
  async healthy() {
    if (!this.options.tls) return (await fetch(`${this.vesselUrl}/healthz`)).ok
    const ca = fs.readFileSync(this.caPath)
    return await new Promise((resolve, reject) => {
      const req = https.get(`${this.vesselUrl}/healthz`, { ca }, (res) => {
        res.resume()
        resolve(res.statusCode === 200)
      })
      req.on('error', reject)
    })
  }

  // A clean stop and a new vesseld on the same state directory (running
  // VMs are stopped: --stop-vms-on-exit; paused sandboxes survive).
  async restart() {
    this.proc.kill('SIGTERM')
    await this.exited
    await this.spawn()
  }

  // What the SDK needs, as a user sets it through the environment.
  opts(extra = {}) {
    return { apiUrl: this.apiUrl, apiKey: this.key, requestTimeoutMs: 600_000, ...extra }
  }

  // Vessel's own API, to see what an E2B call became (or to make sandboxes
  // without the E2B front end).
  async vessel(method, target, body) {
    const r = await fetch(`${this.vesselUrl}${target}`, {
      method,
      headers: { Authorization: `Bearer ${this.vesselKey}`, 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    })
    return { status: r.status, body: await r.json().catch(() => null) }
  }

  // Creates a sandbox of `template` through Vessel's API and waits until it runs.
  async create(template) {
    const c = await this.vessel('POST', '/v1/sandboxes', { template })
    if (c.status !== 202) throw new Error(`create: ${JSON.stringify(c)}`)
    return await this.waitFor(c.body.sandbox.id, 'running')
  }

  async waitFor(id, state) {
    const deadline = Date.now() + 600_000
    for (;;) {
      const g = await this.vessel('GET', `/v1/sandboxes/${id}`)
      if (g.body?.state === state) return id
      if (g.body?.state === 'failed') throw new Error(`sandbox ${id} failed: ${JSON.stringify(g.body)}\n${this.log()}`)
      if (Date.now() > deadline) throw new Error(`sandbox ${id} never ${state}: ${JSON.stringify(g.body)}`)
      await new Promise((r) => setTimeout(r, 250))
    }
  }

  // The sandbox's envd access token, computed as vesseld does (HMAC under
  // the state dir's e2b-token-key).
  accessToken(id) {
    const key = fs.readFileSync(path.join(this.stateDir, 'e2b-token-key'))
    return crypto.createHmac('sha256', key).update(`envd-access-token:${id}`).digest('hex')
  }

  // A shell command in a sandbox through Vessel's data plane (not envd):
  // stdout, stderr and the exit code.
  async sh(sandboxId, shell, user = 'user') {
    const s = await this.vessel('POST', `/v1/sandboxes/${sandboxId}/sessions`)
    if (s.status !== 201 && s.status !== 200) throw new Error(`session: ${JSON.stringify(s)}`)
    const r = await fetch(`${s.body.data_url}/v1/exec`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${s.body.token}` },
      body: JSON.stringify({ shell, user }),
    })
    const text = await r.text()
    const out = { stdout: '', stderr: '', exitCode: -1 }
    let type = ''
    for (const line of text.split('\n')) {
      if (line.startsWith('event:')) type = line.slice(6).trim()
      if (!line.startsWith('data:')) continue
      const data = JSON.parse(line.slice(5))
      if (type === 'stdout' || type === 'stderr')
        out[type] += Buffer.from(data.data, 'base64').toString()
      if (type === 'exit') out.exitCode = data.exit_code
    }
    return out
  }

  log() {
    try {
      return fs.readFileSync(this.logPath, 'utf8').split('\n').slice(-80).join('\n')
    } catch {
      return ''
    }
  }

  async stop() {
    if (!this.proc) return
    if (this.proc.exitCode === null) {
      this.proc.kill('SIGTERM')
      const t = setTimeout(() => this.proc.kill('SIGKILL'), 60_000)
      await this.exited
      clearTimeout(t)
    }
    fs.rmSync(this.root, { recursive: true, force: true })
  }
}
