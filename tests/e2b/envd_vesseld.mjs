// A real vesseld for the envd tests: scratch state and cache, free ports,
// the built-in templates linked in from the store `make build` made
// (VESSEL_TEMPLATE_STORE; the versions this build made), no egress, no warm pool. Sandboxes are created
// through Vessel's own API, so these tests need no E2B REST front end; the
// SDK then reaches them on envd with the sandbox's access token, computed
// here as vesseld does (HMAC under the state dir's e2b-token-key).
import { spawn, execFileSync } from 'node:child_process'
import crypto from 'node:crypto'
import fs from 'node:fs'
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

export class EnvdVesseld {
  async start() {
    this.root = fs.mkdtempSync(path.join(os.tmpdir(), 'vessel-envd-'))
    const cache = path.join(this.root, 'cache')
    const store = need('VESSEL_TEMPLATE_STORE')
    // Only the versions this build made: the store is a shared cache, and
    // vesseld takes a template's newest version, which may be another
    // checkout's (with another agent). `vessel template build` names ours
    // (cached: it only hashes the inputs).
    for (const t of ['minimal', 'debian']) {
      const out = execFileSync(
        need('VESSEL_CLI_PATH'),
        ['template', 'build', '--local', '-f', path.join(repo, 'guest/templates', t, 'template.json'), '--store', store],
        { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] },
      )
      const version = out.trim().split('\n').pop().split('@')[1]
      if (!version) throw new Error(`template ${t}: no version in ${JSON.stringify(out)}`)
      const dest = path.join(cache, 'templates', t)
      fs.mkdirSync(dest, { recursive: true })
      try {
        execFileSync('cp', ['-al', path.join(store, t, version), dest])
      } catch {
        execFileSync('cp', ['-a', path.join(store, t, version), dest])
      }
    }
    this.stateDir = path.join(this.root, 'state')
    const [api, data, envd] = [await freePort(), await freePort(), await freePort()]
    this.apiUrl = `http://127.0.0.1:${api}`
    this.envdUrl = `http://127.0.0.1:${envd}`
    this.logPath = path.join(this.root, 'vesseld.log')
    const log = fs.openSync(this.logPath, 'a')
    this.proc = spawn(
      need('VESSELD_PATH'),
      [
        '--state-dir', this.stateDir, '--cache-dir', cache,
        '--listen', `127.0.0.1:${api}`, '--data-listen', `127.0.0.1:${data}`,
        '--e2b-envd-listen', `127.0.0.1:${envd}`,
        '--kernel', need('VESSEL_KERNEL'), '--minimal-image', need('VESSEL_MINIMAL_IMAGE'),
        '--accel', 'tcg', '--warm-pool', 'none', '--no-egress', '--stop-vms-on-exit',
      ],
      { stdio: ['ignore', log, log] },
    )
    this.exited = new Promise((resolve) => this.proc.on('exit', (code, sig) => resolve({ code, sig })))
    const deadline = Date.now() + 300_000
    for (;;) {
      if (this.proc.exitCode !== null) throw new Error(`vesseld exited:\n${this.log()}`)
      try {
        if ((await fetch(`${this.apiUrl}/healthz`)).ok) break
      } catch {}
      if (Date.now() > deadline) throw new Error(`vesseld did not come up:\n${this.log()}`)
      await new Promise((r) => setTimeout(r, 200))
    }
    this.key = fs.readFileSync(path.join(this.stateDir, 'dev-api-key'), 'utf8').trim()
    return this
  }

  log() {
    try {
      return fs.readFileSync(this.logPath, 'utf8').split('\n').slice(-60).join('\n')
    } catch {
      return ''
    }
  }

  async vessel(method, target, body) {
    const r = await fetch(`${this.apiUrl}${target}`, {
      method,
      headers: { Authorization: `Bearer ${this.key}`, 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    })
    return { status: r.status, body: await r.json().catch(() => null) }
  }

  // Creates a sandbox of `template` and waits until it runs.
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

  accessToken(id) {
    const key = fs.readFileSync(path.join(this.stateDir, 'e2b-token-key'))
    return crypto.createHmac('sha256', key).update(`envd-access-token:${id}`).digest('hex')
  }

  async stop() {
    if (this.proc && this.proc.exitCode === null) {
      this.proc.kill('SIGTERM')
      await this.exited
    }
    fs.rmSync(this.root, { recursive: true, force: true })
  }
}
