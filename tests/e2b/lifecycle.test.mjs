// E2B's sandbox lifecycle through E2B's own SDK (e2b 2.45, pinned) against a
// real vesseld with real guests: `lifecycle: {onTimeout: 'pause'}` pauses a
// sandbox when its timeout ends instead of killing it, connect resumes it,
// the setting survives a vesseld restart, and a filesystem-only pause
// (`keepMemory: false`) keeps files and boots the sandbox again.
import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox } from 'e2b'
import { Vesseld } from './vesseld.mjs'

const d = new Vesseld({ templates: ['minimal', 'base'], rest: true, envd: true })
// TCG guests: restores take seconds, a boot tens of seconds.
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

// Waits for the state the reaper moves the sandbox to.
async function waitState(id, state) {
  const deadline = Date.now() + 300_000
  for (;;) {
    const info = await Sandbox.getInfo(id, slow)
    if (info.state === state) return info
    if (Date.now() > deadline) throw new Error(`${id} never ${state}: ${JSON.stringify(info)}\n${d.log()}`)
    await new Promise((r) => setTimeout(r, 250))
  }
}

test('a timeout pauses when asked: memory kept, connect resumes, the setting survives a restart', async () => {
  const s = await Sandbox.create({ timeoutMs: 600_000, lifecycle: { onTimeout: 'pause', autoResume: true }, ...slow })
  try {
    let info = await s.getInfo()
    assert.deepEqual(info.lifecycle, { onTimeout: 'pause', autoResume: true })
    await s.files.write('/home/user/kept.txt', 'kept')
    const bg = await s.commands.run('sleep 3600', { background: true })
    await s.setTimeout(1_000)
    info = await waitState(s.sandboxId, 'paused')
    // E2B shows a pausing sandbox as paused; Vessel's API says when it is.
    await d.waitFor(s.sandboxId, 'paused')
    // Kept paused (until the deployment's cap), not killed at its end.
    assert.ok(info.endAt.getTime() - Date.now() > 3_600_000, `endAt ${info.endAt.toISOString()}`)
    assert.equal(await s.isRunning(), false)

    await d.restart()
    info = await Sandbox.getInfo(s.sandboxId, slow)
    assert.equal(info.state, 'paused')
    assert.deepEqual(info.lifecycle, { onTimeout: 'pause', autoResume: true })

    await s.connect(slow)
    assert.equal((await s.getInfo()).state, 'running')
    assert.equal(await s.files.read('/home/user/kept.txt'), 'kept')
    const procs = await s.commands.list()
    assert.ok(procs.some((p) => p.pid === bg.pid), 'the process kept running through the pause')

    // The next timeout pauses it again: the setting came through the restart.
    await s.setTimeout(1_000)
    await waitState(s.sandboxId, 'paused')
  } finally {
    await s.kill().catch(() => {})
  }
})

test('a filesystem-only pause on timeout keeps files and boots again on connect', async () => {
  const s = await Sandbox.create({
    timeoutMs: 600_000,
    lifecycle: { onTimeout: { action: 'pause', keepMemory: false } },
    ...slow,
  })
  try {
    assert.deepEqual((await s.getInfo()).lifecycle, { onTimeout: 'pause', autoResume: false })
    await s.files.write('/home/user/marker.txt', 'fs-only')
    const bootBefore = (await s.commands.run('cat /proc/sys/kernel/random/boot_id')).stdout.trim()
    await s.setTimeout(1_000)
    await waitState(s.sandboxId, 'paused')
    await s.connect(slow)
    assert.equal((await s.getInfo()).state, 'running')
    assert.equal((await s.files.read('/home/user/marker.txt')).trim(), 'fs-only')
    const bootAfter = (await s.commands.run('cat /proc/sys/kernel/random/boot_id')).stdout.trim()
    assert.match(bootAfter, /^[0-9a-f-]{36}$/)
    assert.notEqual(bootAfter, bootBefore, 'a filesystem-only resume is a new boot')
  } finally {
    await s.kill().catch(() => {})
  }
})

test('lifecycle combinations E2B refuses are refused with 400', async () => {
  for (const body of [
    { templateID: 'base', autoResume: { enabled: true } },
    { templateID: 'base', autoPause: true, autoPauseMemory: false, autoResume: { enabled: true } },
    { templateID: 'base', autoPauseMemory: false },
  ]) {
    const r = await fetch(`${d.apiUrl}/sandboxes`, {
      method: 'POST',
      headers: { 'X-API-Key': d.key, 'Content-Type': 'application/json' },
      body: JSON.stringify(body),
    })
    assert.equal(r.status, 400, JSON.stringify(body))
    assert.equal((await r.json()).code, 400)
  }
})
