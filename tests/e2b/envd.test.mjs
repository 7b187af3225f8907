// E2B's own JS SDK (e2b 2.45.0, pinned) against Vessel's envd (port 49983):
// commands, pty, files, watch and signed URLs on a real guest. The sandbox
// is created through Vessel's API and the SDK attached to it on envd alone
// (E2B_SANDBOX_URL), so this needs no E2B REST front end.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox, CommandExitError, TimeoutError, FilesystemEventType } from 'e2b'
import { Vesseld } from './vesseld.mjs'

let d
let sbx

before(async () => {
  d = await new Vesseld({ templates: ['minimal', 'debian'], rest: false, envd: true, egress: false }).start()
  const id = await d.create('debian')
  process.env.E2B_SANDBOX_URL = d.envdUrl
  // What Sandbox.connect builds from the REST answer.
  sbx = new Sandbox({
    sandboxId: id,
    sandboxDomain: 'vessel.local',
    envdVersion: '0.6.4',
    envdAccessToken: d.accessToken(id),
    apiKey: 'e2b_00',
    requestTimeoutMs: 120_000,
  })
})

after(async () => {
  await d?.stop()
})

test('run: stdout, stderr and exit codes', async () => {
  const r = await sbx.commands.run('echo out; echo err >&2; id -un; pwd')
  assert.equal(r.exitCode, 0)
  assert.equal(r.stdout, 'out\nuser\n/home/user\n')
  assert.equal(r.stderr, 'err\n')
  await assert.rejects(sbx.commands.run('echo no >&2; exit 3'), (e) => {
    assert.ok(e instanceof CommandExitError, String(e))
    assert.equal(e.exitCode, 3)
    assert.equal(e.stderr, 'no\n')
    return true
  })
  const root = await sbx.commands.run('id -u', { user: 'root' })
  assert.equal(root.stdout, '0\n')
})

test('background command with callbacks, listed, then killed', async () => {
  const seen = []
  const h = await sbx.commands.run('echo started; sleep 600', {
    background: true,
    onStdout: (s) => seen.push(s),
  })
  const deadline = Date.now() + 30_000
  while (!seen.join('').includes('started') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100))
  assert.match(seen.join(''), /started/)
  const listed = await sbx.commands.list()
  assert.ok(listed.some((p) => p.pid === h.pid), JSON.stringify(listed))
  assert.equal(await h.kill(), true)
  await assert.rejects(h.wait())
  assert.equal(await sbx.commands.kill(999999), false)
})

test('stdin', async () => {
  const h = await sbx.commands.run('read a; echo got:$a', { background: true, stdin: true })
  await sbx.commands.sendStdin(h.pid, 'hello\n')
  const r = await h.wait()
  assert.equal(r.stdout, 'got:hello\n')
})

test('a process outlives its stream and is reconnected by pid', async () => {
  const h = await sbx.commands.run('sleep 3; echo done', { background: true })
  await h.disconnect()
  const again = await sbx.commands.connect(h.pid)
  const r = await again.wait()
  assert.equal(r.stdout, 'done\n')
})

test('pty: create, input, resize, kill', async () => {
  const chunks = []
  const p = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => chunks.push(Buffer.from(d)) })
  const text = () => Buffer.concat(chunks).toString()
  const until = async (re) => {
    const deadline = Date.now() + 30_000
    while (!re.test(text()) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100))
  }
  await sbx.pty.sendInput(p.pid, new TextEncoder().encode('echo $((6*7)); stty size\n'))
  await until(/24 80/)
  await sbx.pty.resize(p.pid, { cols: 100, rows: 30 })
  await sbx.pty.sendInput(p.pid, new TextEncoder().encode('stty size\n'))
  await until(/30 100/)
  assert.match(text(), /42/)
  assert.match(text(), /24 80/)
  assert.match(text(), /30 100/)
  assert.equal(await sbx.pty.kill(p.pid), true)
})

test('files: write, read, list, exists, rename, remove, makeDir', async () => {
  const info = await sbx.files.write('notes/a.txt', 'hello')
  assert.equal(info.path, '/home/user/notes/a.txt')
  assert.equal(await sbx.files.read('/home/user/notes/a.txt'), 'hello')
  const bytes = await sbx.files.read('notes/a.txt', { format: 'bytes' })
  assert.deepEqual(Buffer.from(bytes).toString(), 'hello')
  const owner = await sbx.commands.run('stat -c %U /home/user/notes/a.txt /home/user/notes')
  assert.equal(owner.stdout, 'user\nuser\n')
  await sbx.files.write([
    { path: 'notes/c.txt', data: 'c' },
    { path: 'notes/b.txt', data: 'b' },
  ])
  const names = (await sbx.files.list('notes')).map((e) => e.name)
  assert.deepEqual(names, ['a.txt', 'b.txt', 'c.txt'])
  assert.equal(await sbx.files.exists('notes/a.txt'), true)
  assert.equal(await sbx.files.exists('notes/zzz'), false)
  const moved = await sbx.files.rename('notes/a.txt', 'notes/d.txt')
  assert.equal(moved.name, 'd.txt')
  assert.equal(await sbx.files.exists('notes/a.txt'), false)
  await sbx.files.remove('notes/d.txt')
  assert.equal(await sbx.files.exists('notes/d.txt'), false)
  assert.equal(await sbx.files.makeDir('made/deep'), true)
  assert.equal(await sbx.files.makeDir('made/deep'), false)
  const info2 = await sbx.files.getInfo('made')
  assert.equal(info2.type, 'dir')
  await assert.rejects(sbx.files.read('nope.txt'), /not exist|not found/i)
  // metadata: stored as xattrs, returned by getInfo and list, replaced by each upload
  const withMd = await sbx.files.write('md.txt', 'm', { metadata: { owner: 'team-a', Stage: 'dev' } })
  assert.deepEqual(withMd.metadata, { owner: 'team-a', stage: 'dev' })
  assert.deepEqual((await sbx.files.getInfo('md.txt')).metadata, { owner: 'team-a', stage: 'dev' })
  const listedMd = (await sbx.files.list('.')).find((e) => e.name === 'md.txt')
  assert.deepEqual(listedMd.metadata, { owner: 'team-a', stage: 'dev' })
  await sbx.files.write('md.txt', 'm2')
  assert.deepEqual((await sbx.files.getInfo('md.txt')).metadata ?? {}, {})
  // gzip both ways
  await sbx.files.write('z.txt', 'zipped', { gzip: true })
  assert.equal(await sbx.files.read('z.txt', { gzip: true }), 'zipped')
})

test('files: watch a directory, recursively, and see writes as writes', async () => {
  await sbx.files.makeDir('w/deep')
  await sbx.files.write('w/deep/old.txt', 'x')
  const events = []
  const h = await sbx.files.watchDir('w', (e) => events.push(e), { recursive: true })
  await sbx.files.write('w/new.txt', 'x')
  await sbx.files.write('w/deep/old.txt', 'y')
  const deadline = Date.now() + 30_000
  const seen = (name, type) => events.some((e) => e.name === name && e.type === type)
  while (!(seen('new.txt', 'write') && seen('deep/old.txt', 'write')) && Date.now() < deadline)
    await new Promise((r) => setTimeout(r, 100))
  await h.stop()
  assert.ok(seen('new.txt', 'create'), JSON.stringify(events))
  assert.ok(seen('new.txt', 'write'), JSON.stringify(events))
  assert.ok(seen('deep/old.txt', 'write'), JSON.stringify(events))
})

test('files as envd does them: parents by root for the user, metadata kept, absolute links', async () => {
  // `user` may write where only root could make the directory.
  const [w] = await sbx.files.write([{ path: '/e2b-top/sub/f.txt', data: 'x' }])
  assert.equal(w.path, '/e2b-top/sub/f.txt')
  const owner = await sbx.commands.run('stat -c %U /e2b-top /e2b-top/sub /e2b-top/sub/f.txt')
  assert.equal(owner.stdout, 'user\nuser\nuser\n')
  await sbx.files.makeDir('/e2b-made/deep')
  assert.equal((await sbx.files.getInfo('/e2b-made')).owner, 'user')
  // Removing what is not there is no error (os.RemoveAll).
  await sbx.files.remove('not-there-at-all.txt')
  // A rename answers with the file's metadata.
  await sbx.files.write('md-old.txt', 'c', { metadata: { stage: 'renamed' } })
  const moved = await sbx.files.rename('md-old.txt', 'md-new.txt')
  assert.deepEqual(moved.metadata, { stage: 'renamed' })
  // A relative symlink's target, absolute.
  await sbx.commands.run('ln -sf md-new.txt md-link.txt')
  assert.equal((await sbx.files.getInfo('md-link.txt')).symlinkTarget, '/home/user/md-new.txt')
  // Watch events with the entry, where it still exists.
  await sbx.files.makeDir('watch-entry')
  await sbx.files.write('watch-entry/a.txt', '1')
  let hit
  const got = new Promise((resolve) => (hit = resolve))
  const wh = await sbx.files.watchDir(
    'watch-entry',
    (ev) => {
      if (ev.type === FilesystemEventType.WRITE && ev.name === 'a.txt') hit(ev)
    },
    { includeEntry: true, allowNetworkMounts: true },
  )
  await sbx.files.write('watch-entry/a.txt', '2')
  const ev = await got
  await wh.stop()
  assert.equal(ev.entry?.path, '/home/user/watch-entry/a.txt')
})

test('signed URLs work with no token, naming their sandbox', async () => {
  // E2B_SANDBOX_URL names no sandbox: a signed URL must (issue 25: no
  // HMAC per live sandbox), here with the E2b-Sandbox-Id header.
  const named = { 'E2b-Sandbox-Id': sbx.sandboxId }
  const up = await sbx.uploadUrl('signed/up.txt')
  const form = new FormData()
  form.append('file', new Blob(['via url']), 'signed/up.txt')
  const r = await fetch(up, { method: 'POST', body: form, headers: named })
  assert.equal(r.status, 200, await r.clone().text())
  const down = await sbx.downloadUrl('signed/up.txt')
  const g = await fetch(down, { headers: named })
  assert.equal(g.status, 200)
  assert.equal(await g.text(), 'via url')
  assert.equal(g.headers.get('x-content-type-options'), 'nosniff')
  assert.equal((await fetch(down)).status, 400)
  const forged = down.replace(/signature=[^&]+/, 'signature=v1_forged')
  assert.equal((await fetch(forged, { headers: named })).status, 401)
  const expiring = await sbx.downloadUrl('signed/up.txt', { useSignatureExpiration: 60 })
  assert.equal((await fetch(expiring, { headers: named })).status, 200)
})

test('a process survives pause and resume', async () => {
  const h = await sbx.commands.run('read a; echo got:$a', { background: true, stdin: true })
  const p = await d.vessel('POST', `/v1/sandboxes/${sbx.sandboxId}:pause`)
  assert.equal(p.status, 202, JSON.stringify(p))
  await d.waitFor(sbx.sandboxId, 'paused')
  // The stream that started it was cut with the VM.
  await assert.rejects(h.wait())
  const r = await d.vessel('POST', `/v1/sandboxes/${sbx.sandboxId}:resume`)
  assert.equal(r.status, 202, JSON.stringify(r))
  await d.waitFor(sbx.sandboxId, 'running')
  const again = await sbx.commands.connect(h.pid)
  await sbx.commands.sendStdin(h.pid, 'back\n')
  const res = await again.wait()
  assert.equal(res.stdout, 'got:back\n')
})

test('a sandbox dying mid-command cuts the stream: the SDK says it was killed', async () => {
  const h = await sbx.commands.run('sleep 600', { background: true })
  const del = await d.vessel('DELETE', `/v1/sandboxes/${sbx.sandboxId}`)
  assert.equal(del.status, 202, JSON.stringify(del))
  // A cut, not an end: undici must see the connection fail (the stream is
  // keep-alive), so the SDK probes /health and says the sandbox is gone.
  await assert.rejects(h.wait(), (e) => {
    assert.ok(e instanceof TimeoutError, String(e))
    assert.match(e.message, /sandbox was killed or reached its end of life/)
    return true
  })
  const health = await fetch(`${d.envdUrl}/health`, { headers: { 'E2b-Sandbox-Id': sbx.sandboxId } })
  assert.equal(health.status, 502)
})
