// The E2B REST half through E2B's own SDK, unmodified, against a real
// vesseld with real guests: `e2b` 2.45 (the v1 routes) and 2.51 (v2), as a
// user points them at Vessel with E2B_API_URL and E2B_API_KEY (the key's
// e2b_ form from dev-e2b-api-key). Commands and files (envd) are tested by
// the envd suite, not here.
import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox, SandboxNotFoundError, AuthenticationError, Secret, Template, ApiClient, ConnectionConfig } from 'e2b'
import {
  Sandbox as Sandbox251,
  Secret as Secret251,
  ApiClient as ApiClient251,
  ConnectionConfig as ConnectionConfig251,
} from 'e2b-251'
import { Vesseld } from './vesseld.mjs'

// envd too: the logs test runs a command and writes a file through it.
const d = new Vesseld({ envd: true })
const run = `run-${process.pid}-${Date.now()}`
// TCG guests: restores take seconds to tens of seconds.
const slow = { requestTimeoutMs: 600_000 }

before(async () => {
  await d.start()
  process.env.E2B_API_URL = d.apiUrl
  process.env.E2B_API_KEY = d.key
  process.env.E2B_SANDBOX_URL = d.envdUrl
  delete process.env.E2B_DEBUG
})

after(async () => {
  await d.stop()
})

async function listAll(opts) {
  const p = Sandbox.list(opts)
  const pages = []
  while (p.hasNext) pages.push(await p.nextItems())
  return pages
}

describe('e2b 2.45 (v1 routes)', { timeout: 1_800_000 }, () => {
  test('the key in its e2b_ form authenticates; a wrong one does not', async () => {
    assert.match(d.key, /^e2b_[0-9a-f]+$/)
    const wrong = 'e2b_' + Buffer.from('vsk_' + '0'.repeat(64)).toString('hex')
    await assert.rejects(Sandbox.list({ apiKey: wrong }).nextItems(), AuthenticationError)
  })

  test('create, getInfo, list by metadata with paging, newest first', async () => {
    const made = []
    for (let i = 0; i < 3; i++) {
      made.push(
        await Sandbox.create({ metadata: { suite: run, n: String(i) }, timeoutMs: 600_000, ...slow }),
      )
    }
    for (const s of made) {
      assert.match(s.sandboxId, /^sb-[0-9a-f]+$/)
      assert.match(s.envdAccessToken ?? '', /^[0-9a-f]{64}$/)
    }
    const info = await Sandbox.getInfo(made[0].sandboxId)
    assert.equal(info.templateId, 'base')
    assert.equal(info.state, 'running')
    assert.deepEqual(info.metadata, { suite: run, n: '0' })
    const left = info.endAt.getTime() - Date.now()
    assert.ok(left > 500_000 && left <= 600_000, `endAt is ${left} ms away`)

    const pages = await listAll({ query: { metadata: { suite: run } }, limit: 2 })
    assert.deepEqual(pages.map((p) => p.length), [2, 1])
    const ids = pages.flat().map((s) => s.sandboxId)
    assert.deepEqual(ids, made.map((s) => s.sandboxId).reverse())
    const asc = await listAll({ query: { metadata: { suite: run } }, order: 'asc', limit: 2 })
    assert.deepEqual(asc.flat().map((s) => s.sandboxId), made.map((s) => s.sandboxId))
    const one = await listAll({ query: { metadata: { suite: run, n: '1' } } })
    assert.deepEqual(one.flat().map((s) => s.sandboxId), [made[1].sandboxId])
    const none = await listAll({ query: { metadata: { suite: 'nobody' } } })
    assert.equal(none.flat().length, 0)

    // kill: true once, then the sandbox is gone and a second kill says so.
    assert.equal(await made[2].kill(slow), true)
    await assert.rejects(Sandbox.getInfo(made[2].sandboxId), SandboxNotFoundError)
    assert.equal(await Sandbox.kill(made[2].sandboxId, slow), false)
    const rest = await listAll({ query: { metadata: { suite: run } } })
    assert.deepEqual(rest.flat().map((s) => s.sandboxId).sort(),
      [made[0].sandboxId, made[1].sandboxId].sort())

    // setTimeout is a lifetime counted from now: this one ends by itself.
    await made[1].setTimeout(2_000)
    const end = (await Sandbox.getInfo(made[1].sandboxId)).endAt.getTime()
    assert.ok(end - Date.now() <= 2_000, 'setTimeout shortened the lifetime')
    const deadline = Date.now() + 60_000
    let gone = false
    while (!gone && Date.now() < deadline) {
      try {
        await Sandbox.getInfo(made[1].sandboxId)
        await new Promise((r) => setTimeout(r, 500))
      } catch (e) {
        assert.ok(e instanceof SandboxNotFoundError, String(e))
        gone = true
      }
    }
    assert.ok(gone, 'the sandbox outlived its timeout')

    // pause (409 -> false the second time), connect resumes, then only extends.
    const s = made[0]
    assert.equal(await s.pause(slow), true)
    assert.equal(await s.pause(slow), false)
    assert.equal((await Sandbox.getInfo(s.sandboxId)).state, 'paused')
    const paused = await listAll({ query: { metadata: { suite: run }, state: ['paused'] } })
    assert.deepEqual(paused.flat().map((x) => x.sandboxId), [s.sandboxId])
    const back = await Sandbox.connect(s.sandboxId, { timeoutMs: 120_000, ...slow })
    assert.equal(back.sandboxId, s.sandboxId)
    assert.equal(back.envdAccessToken, s.envdAccessToken, 'the token survives pause and resume')
    let info2 = await Sandbox.getInfo(s.sandboxId)
    assert.equal(info2.state, 'running')
    const afterResume = info2.endAt.getTime()
    assert.ok(afterResume - Date.now() <= 120_000, 'a resume sets the timeout anew')
    await Sandbox.connect(s.sandboxId, { timeoutMs: 10_000, ...slow }) // shorter: not shortened
    info2 = await Sandbox.getInfo(s.sandboxId)
    assert.equal(info2.endAt.getTime(), afterResume)
    await Sandbox.connect(s.sandboxId, { timeoutMs: 900_000, ...slow }) // longer: extended
    assert.ok((await Sandbox.getInfo(s.sandboxId)).endAt.getTime() > afterResume + 600_000)
    await assert.rejects(Sandbox.connect('sb-000000000000'), SandboxNotFoundError)
    assert.equal(await s.kill(slow), true)
  })

  test('snapshot: create one, list it, start a sandbox from it, delete it', async () => {
    const s = await Sandbox.create({ metadata: { suite: run, part: 'snapshot' }, ...slow })
    const snap = await s.createSnapshot(slow)
    assert.ok(snap.snapshotId.startsWith(s.sandboxId), snap.snapshotId)
    const listed = []
    const p = s.listSnapshots()
    while (p.hasNext) listed.push(...(await p.nextItems()))
    assert.deepEqual(listed.map((x) => x.snapshotId), [snap.snapshotId])
    const child = await Sandbox.create(snap.snapshotId, { timeoutMs: 300_000, ...slow })
    const info = await Sandbox.getInfo(child.sandboxId)
    assert.equal(info.templateId, snap.snapshotId)
    assert.equal(info.state, 'running')
    // Deleted while a sandbox of it runs: the sandbox runs on (its files
    // stay until it ends); no new sandbox starts from it.
    assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId, slow), true)
    assert.equal((await Sandbox.getInfo(child.sandboxId)).state, 'running')
    assert.equal((await child.commands.run('echo still here')).stdout, 'still here\n')
    await assert.rejects(Sandbox.create(snap.snapshotId, slow), /not found|does not exist/)
    assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId, slow), false)
    assert.equal(await child.kill(slow), true)

    // fork: the copy runs, with the parent's template.
    const forks = await s.fork({ count: 1, ...slow })
    assert.equal(forks.length, 1)
    assert.ok(forks[0] instanceof Sandbox, String(forks[0]))
    const fi = await Sandbox.getInfo(forks[0].sandboxId)
    assert.equal(fi.state, 'running')
    assert.equal(fi.templateId, 'base')
    assert.equal(await forks[0].kill(slow), true)
    assert.equal(await s.kill(slow), true)
  })

  test('templates: base is built in, with its alias', async () => {
    assert.equal(await Template.exists('base'), true)
    assert.equal(await Template.exists('no-such-template'), false)
    const r = await fetch(`${d.apiUrl}/templates`, { headers: { 'X-API-Key': d.key } })
    assert.equal(r.status, 200)
    const base = (await r.json()).find((t) => t.templateID === 'base')
    assert.ok(base, 'GET /templates lists base')
    assert.equal(base.public, true)
    assert.equal(base.memoryMB, 512)
    // Errors are E2B's {code, message} with the HTTP status as the code.
    const bad = await fetch(`${d.apiUrl}/sandboxes/sb-000000000000`, { headers: { 'X-API-Key': d.key } })
    assert.equal(bad.status, 404)
    const body = await bad.json()
    assert.equal(body.code, 404)
    assert.match(body.message, /sb-000000000000/)
  })

  test('base: user 1000 at /home/user with passwordless sudo, bash, python, curl, git, tput', async () => {
    const s = await Sandbox.create({ metadata: { suite: run, part: 'base' }, ...slow })
    // Through Vessel's own data plane: commands through envd are the envd suite's.
    const r = await d.sh(
      s.sandboxId,
      'id -u; echo $HOME; pwd; getent passwd user | cut -d: -f7; sudo -n id -u; ' +
        'python -c "import sys; print(sys.version_info[0])"; tput -T xterm cols; ' +
        'git --version | cut -d" " -f1; curl --version | cut -d" " -f1 | head -1',
    )
    assert.equal(r.exitCode, 0, r.stderr)
    assert.deepEqual(r.stdout.trim().split('\n'),
      ['1000', '/home/user', '/home/user', '/bin/bash', '0', '3', '80', 'git', 'curl'])
    assert.equal(await s.kill(slow), true)
  })

  test('secrets are the tenant credentials', async () => {
    const name = `tok_${process.pid}`
    const made = await Secret.create(name, 'Bearer s3cret-0123456789abcdef')
    assert.equal(made.name, name)
    const all = []
    const p = Secret.list()
    while (p.hasNext) all.push(...(await p.nextItems()))
    assert.ok(all.some((x) => x.name === name))
    assert.equal(JSON.stringify(all).includes('s3cret'), false, 'a value is never returned')
    assert.equal(await Secret.destroy(name), true)
    await assert.rejects(Secret.getInfo(name))
  })
})

describe('e2b 2.51 (v2 routes)', { timeout: 1_800_000 }, () => {
  test('create with internet off and an allow list; connect; what has no mapping is refused', async () => {
    const s = await Sandbox251.create({
      metadata: { suite: run, part: 'v2' },
      allowInternetAccess: false,
      network: { allowOut: ['example.com'] },
      timeoutMs: 300_000,
      ...slow,
    })
    const info = await Sandbox251.getInfo(s.sandboxId)
    assert.equal(info.allowInternetAccess, false)
    assert.deepEqual(info.network?.allowOut, ['example.com'])
    const again = await Sandbox251.connect(s.sandboxId, slow)  // POST /v2/sandboxes/{id}/connect
    assert.equal(again.sandboxId, s.sandboxId)
    // Live change: everything allowed again.
    await Sandbox251.updateNetwork(s.sandboxId, { allowInternetAccess: true })
    assert.equal((await Sandbox251.getInfo(s.sandboxId)).allowInternetAccess, true)
    // IP and CIDR rules are policy (issue 25); names cannot be denied.
    await Sandbox251.updateNetwork(s.sandboxId, { denyOut: ['203.0.113.0/24'] })
    assert.equal((await Sandbox251.getInfo(s.sandboxId)).allowInternetAccess, true)
    await assert.rejects(
      Sandbox251.updateNetwork(s.sandboxId, { denyOut: ['example.com'] }),
      /only IP addresses and CIDR ranges/,
    )
    await assert.rejects(
      Sandbox251.updateNetwork(s.sandboxId, { allowOut: ['10.0.0.0/8'], denyOut: ['0.0.0.0/0'] }),
      /stays refused/,
    )
    assert.equal(await s.kill(slow), true)
  })

  test('the routes the SDK hides: connect 200 or 201, resume 409, refreshes; metrics', async () => {
    const s = await Sandbox251.create({ metadata: { suite: run, part: 'raw' }, ...slow })
    const call = async (method, target, body) => {
      const r = await fetch(`${d.apiUrl}${target}`, {
        method,
        headers: { 'X-API-Key': d.key, 'Content-Type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      })
      return { status: r.status, body: await r.json().catch(() => null) }
    }
    const id = s.sandboxId
    assert.equal((await call('POST', `/v2/sandboxes/${id}/connect`, {})).status, 200)
    const resume = await call('POST', `/sandboxes/${id}/resume`, { timeout: 60 })
    assert.equal(resume.status, 409)
    assert.equal(resume.body.code, 409)
    assert.equal((await call('POST', `/sandboxes/${id}/refreshes`, { duration: 60 })).status, 204)
    // One sample, measured now on the host: the VM's CPU, memory and disk overlay.
    const [m, ...more] = await s.getMetrics()
    assert.equal(more.length, 0)
    assert.equal(m.cpuCount, 1)
    assert.equal(m.memTotal, 512 * 1024 * 1024)
    assert.ok(m.memUsed > 0 && m.memUsed <= m.memTotal, `memUsed ${m.memUsed}`)
    assert.ok(m.cpuUsedPct >= 0 && m.cpuUsedPct <= 100, `cpuUsedPct ${m.cpuUsedPct}`)
    assert.ok(m.diskTotal >= 1024 * 1024 * 1024 && m.diskUsed > 0, JSON.stringify(m))
    assert.ok(Math.abs(m.timestamp.getTime() - Date.now()) < 60_000)
    const hourAgo = new Date(Date.now() - 3_600_000)
    assert.deepEqual(await s.getMetrics({ start: hourAgo, end: new Date(hourAgo.getTime() + 60_000) }), [])
    assert.equal((await call('POST', `/sandboxes/${id}/pause`, {})).status, 204)
    assert.equal((await call('POST', `/sandboxes/${id}/pause`, {})).status, 409)
    const noMemory = await call('POST', `/v2/sandboxes/${id}/connect`, { memory: false })
    assert.equal(noMemory.status, 400)
    assert.match(noMemory.body.message, /no mapping/)
    const resumed = await call('POST', `/v2/sandboxes/${id}/connect`, { timeout: 60 })
    assert.equal(resumed.status, 201)
    assert.equal(resumed.body.sandboxID, id)
    assert.equal(resumed.body.envdAccessToken, s.envdAccessToken)
    assert.equal((await call('POST', `/v2/sandboxes/${id}/connect`, {})).status, 200)
    assert.equal((await call('DELETE', `/sandboxes/${id}`)).status, 204)
    assert.equal((await call('DELETE', `/sandboxes/${id}`)).status, 404)
  })

  test("sandbox logs through the SDK's own API client, as the e2b CLI reads them: v1 and v2 routes", async () => {
    const secret = `env-secret-${process.pid}-0f1e2d3c`
    const s = await Sandbox251.create({ metadata: { suite: run, part: 'logs' }, ...slow })
    const id = s.sandboxId
    const r = await s.commands.run('echo logged-$((40+2))', { envs: { TOKEN: secret } })
    assert.equal(r.stdout, 'logged-42\n')
    await s.files.write('/tmp/logged.txt', `contents ${secret}`)
    assert.equal(await s.kill(slow), true)

    // v1 (e2b 2.45's client): {logs: [{timestamp, line}], logEntries: [...]}, oldest first.
    const v1 = await new ApiClient(new ConnectionConfig({ apiKey: d.key })).api.GET(
      '/sandboxes/{sandboxID}/logs', { params: { path: { sandboxID: id }, query: { limit: 1000 } } })
    assert.equal(v1.response.status, 200, JSON.stringify(v1.error))
    const lines = v1.data.logs.map((l) => l.line)
    assert.ok(lines.length === v1.data.logEntries.length && lines.length > 0)
    const at = (pattern) => lines.findIndex((l) => pattern.test(l))
    const created = at(/created/)
    const started = at(/echo logged-\$\(\(40\+2\)\)/)
    const wrote = at(/\/tmp\/logged\.txt/)
    const deleted = at(/deleted/)
    assert.ok(created >= 0 && started > created && wrote > started && deleted > wrote, lines.join('\n'))
    for (const l of v1.data.logs) assert.ok(!Number.isNaN(new Date(l.timestamp).getTime()), l.timestamp)

    // v2 (2.51's client): {logs: [{timestamp, level, message, fields}]}, with its filters.
    const api = new ApiClient251(new ConnectionConfig251({ apiKey: d.key })).api
    const v2 = await api.GET('/v2/sandboxes/{sandboxID}/logs', { params: { path: { sandboxID: id } } })
    assert.equal(v2.response.status, 200, JSON.stringify(v2.error))
    const kinds = new Set(v2.data.logs.map((l) => l.fields.kind))
    for (const k of ['lifecycle', 'command', 'file']) assert.ok(kinds.has(k), [...kinds].join(','))
    for (const l of v2.data.logs) assert.match(l.level, /^(info|error)$/)
    const exit = v2.data.logs.find((l) => l.fields.kind === 'command' && l.fields.phase === 'exit')
    assert.equal(exit?.fields.exit_code, '0', JSON.stringify(exit))
    const found = await api.GET('/v2/sandboxes/{sandboxID}/logs', {
      params: { path: { sandboxID: id }, query: { search: 'logged.txt' } },
    })
    assert.ok(found.data.logs.length >= 1)
    for (const l of found.data.logs) assert.match(l.message, /logged\.txt/)
    // Never the command's environment values, the file's contents or a token.
    const all = JSON.stringify([v1.data, v2.data])
    const raw = Buffer.from(d.key.slice(4), 'hex').toString()
    for (const bad of [secret, s.envdAccessToken, d.key, raw]) assert.equal(all.includes(bad), false, bad)
    // Another tenant's key (a wrong key here) reads nothing.
    const wrong = 'e2b_' + Buffer.from('vsk_' + '1'.repeat(64)).toString('hex')
    const denied = await new ApiClient251(new ConnectionConfig251({ apiKey: wrong })).api.GET(
      '/v2/sandboxes/{sandboxID}/logs', { params: { path: { sandboxID: id } } })
    assert.equal(denied.response.status, 401)
  })

  test('header rules become gateway credentials for their host, secrets filled in', async () => {
    const name = `key_${process.pid}`
    await Secret251.create(name, 's3cret-0123456789abcdef')
    const rules = async () =>
      ((await d.vessel('GET', '/v1/credentials')).body?.credentials ?? []).filter((c) =>
        c.name.startsWith('e2b-rule-'))
    const before = (await rules()).length
    const s = await Sandbox251.create({
      metadata: { suite: run, part: 'rules' },
      network: {
        rules: { 'api.example.com': [{ transform: { headers: { 'X-Key': Secret251.fill(name) } } }] },
      },
      ...slow,
    })
    const made = await rules()
    assert.equal(made.length, before + 1)
    const rule = made.find((c) => !c.value)
    assert.deepEqual(rule.hosts, ['api.example.com'])
    assert.equal(rule.header, 'X-Key')
    assert.equal(JSON.stringify(made).includes('s3cret'), false)
    // An unknown secret is refused before any sandbox exists.
    await assert.rejects(
      Sandbox251.create({
        network: { rules: { 'a.example.com': [{ transform: { headers: { A: Secret251.fill('nope') } } }] } },
      }),
      /nope/,
    )
    assert.equal(await s.kill(slow), true)
    assert.equal((await rules()).length, before, 'the rule credentials go with the sandbox')
    assert.equal(await Secret251.destroy(name), true)
  })
})
