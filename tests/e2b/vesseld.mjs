// A real vesseld for the E2B SDK tests: scratch state and cache, free ports
// for every listener, egress on (the gateway in a private namespace), and
// the built-in `minimal` and `base` templates linked in from the template
// store `make build` made (VESSEL_TEMPLATE_STORE), so nothing is rebuilt.
// Stopped with SIGTERM (--stop-vms-on-exit: no VM outlives the test).
import { spawn, execFileSync } from 'node:child_process'
import fs from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'

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

// Hard links where the store and the scratch dir share a filesystem, else a copy.
function linkTemplate(store, dest, name) {
  const from = path.join(store, name)
  if (!fs.existsSync(from)) throw new Error(`template ${name} is not in ${store}; run make build`)
  fs.mkdirSync(dest, { recursive: true })
  try {
    execFileSync('cp', ['-al', from, dest])
  } catch {
    execFileSync('cp', ['-a', from, dest])
  }
}

export class Vesseld {
  async start() {
    const binary = need('VESSELD_PATH')
    this.root = fs.mkdtempSync(path.join(os.tmpdir(), 'vessel-e2b-'))
    const cache = path.join(this.root, 'cache')
    const store = need('VESSEL_TEMPLATE_STORE')
    for (const t of ['minimal', 'base']) linkTemplate(store, path.join(cache, 'templates'), t)
    this.stateDir = path.join(this.root, 'state')
    const [api, data, e2b] = [await freePort(), await freePort(), await freePort()]
    this.apiUrl = `http://127.0.0.1:${e2b}`
    this.vesselUrl = `http://127.0.0.1:${api}`
    this.logPath = path.join(this.root, 'vesseld.log')
    const log = fs.openSync(this.logPath, 'a')
    this.proc = spawn(
      binary,
      [
        '--state-dir', this.stateDir, '--cache-dir', cache,
        '--listen', `127.0.0.1:${api}`, '--data-listen', `127.0.0.1:${data}`,
        '--e2b-listen', `127.0.0.1:${e2b}`,
        '--kernel', need('VESSEL_KERNEL'), '--minimal-image', need('VESSEL_MINIMAL_IMAGE'),
        '--accel', 'tcg', '--warm-pool', 'none', '--stop-vms-on-exit',
        ...(process.env.VESSEL_E2B_TEST_ARGS ?? '').split(' ').filter(Boolean),
      ],
      { stdio: ['ignore', log, log] },
    )
    this.exited = new Promise((resolve) => this.proc.on('exit', (code, sig) => resolve({ code, sig })))
    const deadline = Date.now() + 300_000
    for (;;) {
      if (this.proc.exitCode !== null) throw new Error(`vesseld exited:\n${this.log()}`)
      try {
        const r = await fetch(`${this.apiUrl}/health`)
        if (r.ok) break
      } catch {}
      if (Date.now() > deadline) throw new Error(`vesseld did not come up:\n${this.log()}`)
      await new Promise((r) => setTimeout(r, 200))
    }
    this.key = fs.readFileSync(path.join(this.stateDir, 'dev-e2b-api-key'), 'utf8').trim()
    this.vesselKey = fs.readFileSync(path.join(this.stateDir, 'dev-api-key'), 'utf8').trim()
    return this
  }

  // What the SDK needs, as a user sets it through the environment.
  opts(extra = {}) {
    return { apiUrl: this.apiUrl, apiKey: this.key, requestTimeoutMs: 600_000, ...extra }
  }

  // Vessel's own API, to see what an E2B call became.
  async vessel(method, target, body) {
    const r = await fetch(`${this.vesselUrl}${target}`, {
      method,
      headers: { Authorization: `Bearer ${this.vesselKey}` },
      body: body === undefined ? undefined : JSON.stringify(body),
    })
    return { status: r.status, body: await r.json().catch(() => null) }
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
