// E2B's Volume API through E2B's own SDK (e2b 2.45, pinned) against a real
// vesseld: volumes made, listed, connected and destroyed with the API key;
// their files reached with the volume's token alone (E2B_VOLUME_API_URL:
// the same listener as E2B_API_URL), text, bytes and a streamed multi-MiB
// file, directories to a depth, metadata; a token refused for another
// volume; and a real guest mounting a volume through `volumeMounts`,
// reading what the API wrote and writing what the API reads back.
import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import crypto from 'node:crypto'
import {
  AuthenticationError,
  Sandbox,
  Volume,
  VolumeError,
  VolumeNotFoundError,
  VolumePathNotFoundError,
} from 'e2b'
import { Vesseld } from './vesseld.mjs'

// Small volumes: E2B gives no size, vesseld makes --e2b-volume-mib.
const d = new Vesseld({ templates: ['minimal', 'base'], rest: true, envd: true, args: ['--e2b-volume-mib', '64'] })
// TCG guests: a boot takes tens of seconds.
const slow = { requestTimeoutMs: 600_000 }

before(async () => {
  await d.start()
  process.env.E2B_API_URL = d.apiUrl
  process.env.E2B_API_KEY = d.key
  process.env.E2B_SANDBOX_URL = d.envdUrl
  process.env.E2B_VOLUME_API_URL = d.apiUrl
  delete process.env.E2B_DEBUG
})

after(async () => {
  await d.stop()
})

test('volumes: create, list, getInfo, connect and destroy, as Vessel volumes', async () => {
  const vol = await Volume.create('e2b-vol-a')
  assert.match(vol.volumeId, /^vol-[0-9a-f]+$/)
  assert.equal(vol.name, 'e2b-vol-a')
  assert.ok(vol.token.startsWith('vvt_'), vol.token)

  const listed = await Volume.list()
  assert.deepEqual(listed.filter((v) => v.name === 'e2b-vol-a'), [{ volumeId: vol.volumeId, name: 'e2b-vol-a' }])
  const info = await Volume.getInfo(vol.volumeId)
  assert.equal(info.volumeId, vol.volumeId)
  assert.equal(info.name, 'e2b-vol-a')
  assert.equal(info.token, vol.token)
  const again = await Volume.connect(vol.volumeId)
  assert.equal(again.token, vol.token)
  assert.equal(again.name, 'e2b-vol-a')

  // The same volume in Vessel's own API, of the deployment's E2B size.
  const native = await d.vessel('GET', '/v1/volumes/e2b-vol-a')
  assert.equal(native.status, 200, JSON.stringify(native))
  assert.equal(native.body.id, vol.volumeId)
  assert.equal(native.body.size_mib, 64)

  await assert.rejects(Volume.create('e2b-vol-a'), VolumeError)  // the name is taken (409)
  await assert.rejects(Volume.create('Upper'), /400/)  // a name Vessel cannot keep
  await assert.rejects(Volume.getInfo('vol-000000000000'), VolumeNotFoundError)
  await assert.rejects(Volume.getInfo('nope'), VolumeNotFoundError)
  assert.equal(await Volume.destroy(vol.volumeId), true)
  assert.equal(await Volume.destroy(vol.volumeId), false)
  await assert.rejects(Volume.getInfo(vol.volumeId), VolumeNotFoundError)
  await assert.rejects(again.list('/'), VolumePathNotFoundError)  // its token names no volume now
})

// A stream of `n` MiB of random bytes and its SHA-256 when done.
function randomStream(n) {
  const hash = crypto.createHash('sha256')
  let sent = 0
  const stream = new ReadableStream({
    pull(c) {
      if (sent === n) {
        c.close()
        return
      }
      const chunk = crypto.randomBytes(1 << 20)
      hash.update(chunk)
      sent++
      c.enqueue(new Uint8Array(chunk))
    },
  })
  return { stream, digest: () => hash.digest('hex') }
}

test('files: text, bytes, a streamed multi-MiB file, directories, metadata, removal', async () => {
  const vol = await Volume.create('e2b-files')
  try {
    const w = await vol.writeFile('/hello.txt', 'hello volume')
    assert.equal(w.type, 'file')
    assert.equal(w.path, '/hello.txt')
    assert.equal(w.size, 12)
    assert.ok(w.mtime instanceof Date && !Number.isNaN(w.mtime.getTime()))
    assert.equal(await vol.readFile('/hello.txt'), 'hello volume')

    const bytes = crypto.randomBytes(70_000)
    await vol.writeFile('/bin.dat', new Uint8Array(bytes))
    assert.deepEqual(Buffer.from(await vol.readFile('/bin.dat', { format: 'bytes' })), bytes)

    // 12 MiB streamed up (chunked) and streamed back down.
    const big = randomStream(12)
    const bw = await vol.writeFile('/big.bin', big.stream)
    assert.equal(bw.size, 12 << 20)
    const down = await vol.readFile('/big.bin', { format: 'stream' })
    const hash = crypto.createHash('sha256')
    let got = 0
    for await (const chunk of down) {
      hash.update(chunk)
      got += chunk.length
    }
    assert.equal(got, 12 << 20)
    assert.equal(hash.digest('hex'), big.digest())

    // An existing file is replaced only with force (E2B's spec); the old
    // content stays otherwise.
    await assert.rejects(vol.writeFile('/hello.txt', 'again'), (e) => e instanceof VolumeError && /409/.test(e.message))
    assert.equal(await vol.readFile('/hello.txt'), 'hello volume')
    await vol.writeFile('/hello.txt', 'replaced', { force: true })
    assert.equal(await vol.readFile('/hello.txt'), 'replaced')
    const owned = await vol.writeFile('/owned.txt', 'mine', { uid: 1000, gid: 1000, mode: 0o640 })
    assert.deepEqual([owned.uid, owned.gid, owned.mode], [1000, 1000, 0o640])

    // Directories: parents with force, none without.
    const dir = await vol.makeDir('/a/b/c', { force: true, mode: 0o750 })
    assert.equal(dir.type, 'directory')
    assert.equal(dir.path, '/a/b/c')
    assert.equal(dir.mode, 0o750)
    await assert.rejects(vol.makeDir('/x/y'), VolumePathNotFoundError)
    await assert.rejects(vol.makeDir('/a'), (e) => e instanceof VolumeError && /409/.test(e.message))
    await vol.makeDir('/a', { force: true })  // already there: fine with force
    await vol.writeFile('/a/b/f.txt', 'deep')

    const one = await vol.list('/a')
    assert.deepEqual(one.map((e) => e.path), ['/a/b'])
    const all = await vol.list('/a', { depth: 3 })
    assert.deepEqual(all.map((e) => [e.path, e.type]), [
      ['/a/b', 'directory'],
      ['/a/b/c', 'directory'],
      ['/a/b/f.txt', 'file'],
    ])
    const root = await vol.list('/')
    assert.deepEqual(root.map((e) => e.name), ['a', 'big.bin', 'bin.dat', 'hello.txt', 'lost+found', 'owned.txt'])
    await assert.rejects(vol.list('/missing'), VolumePathNotFoundError)
    await assert.rejects(vol.list('/hello.txt'), /400/)  // not a directory

    const st = await vol.getInfo('/a/b/f.txt')
    assert.equal(st.type, 'file')
    assert.equal(st.size, 4)
    assert.equal(st.name, 'f.txt')
    assert.ok(st.atime instanceof Date && st.ctime instanceof Date)
    assert.equal(await vol.exists('/a/b/f.txt'), true)
    assert.equal(await vol.exists('/a/b/none'), false)
    await assert.rejects(vol.getInfo('/nope'), VolumePathNotFoundError)

    const changed = await vol.updateMetadata('/a/b/f.txt', { uid: 1000, gid: 1001, mode: 0o600 })
    assert.deepEqual([changed.uid, changed.gid, changed.mode], [1000, 1001, 0o600])
    assert.equal((await vol.getInfo('/a/b/f.txt')).mode, 0o600)
    await assert.rejects(vol.updateMetadata('/nope', { mode: 0o600 }), VolumePathNotFoundError)

    await vol.remove('/a')  // a directory with what it holds
    assert.equal(await vol.exists('/a'), false)
    await assert.rejects(vol.remove('/a'), VolumePathNotFoundError)
    // Paths stay in the volume.
    await assert.rejects(vol.readFile('/../../etc/passwd'), /400/)
  } finally {
    await Volume.destroy(vol.volumeId)
  }
})

test("a volume's token works for that volume alone", async () => {
  const a = await Volume.create('e2b-tok-a')
  const b = await Volume.create('e2b-tok-b')
  try {
    await a.writeFile('/secret', 'of a')
    await b.writeFile('/secret', 'of b')
    // Volume b's id with a's token: refused, through the SDK and on the wire.
    const forged = new Volume(b.volumeId, b.name, a.token, a.domain, a.debug)
    await assert.rejects(forged.readFile('/secret'), AuthenticationError)
    await assert.rejects(forged.writeFile('/planted', 'x'), AuthenticationError)
    const url = `${d.apiUrl}/volumecontent/${b.volumeId}/path?path=%2Fsecret`
    for (const auth of [`Bearer ${a.token}`, `Bearer ${d.key}`, 'Bearer vvt_646576_00', undefined]) {
      const r = await fetch(url, { headers: auth ? { Authorization: auth } : {} })
      assert.equal(r.status, 401, `${auth}: ${r.status}`)
      assert.equal((await r.json()).code, 401)
    }
    assert.equal(await b.exists('/planted'), false)
    assert.equal(await b.readFile('/secret'), 'of b')
    // The API key is not a volume's token, nor the token an API key.
    const r = await fetch(`${d.apiUrl}/volumes`, { headers: { 'X-API-Key': a.token } })
    assert.equal(r.status, 401)
  } finally {
    await Volume.destroy(a.volumeId)
    await Volume.destroy(b.volumeId)
  }
})

test('a sandbox mounts a volume: the API and the guest see the same files', async () => {
  const vol = await Volume.create('e2b-shared')
  await vol.writeFile('/x', 'from the API')
  const s = await Sandbox.create('base', { volumeMounts: { '/data': vol }, timeoutMs: 600_000, ...slow })
  try {
    const cat = await s.commands.run('cat /data/x')
    assert.equal(cat.stdout, 'from the API')
    // Root owns the volume's root (0755): root writes there.
    await s.commands.run('printf "from the guest" > /data/y && ln -s /etc/passwd /data/link', { user: 'root' })
    assert.equal(await vol.readFile('/y'), 'from the guest')
    const link = await vol.getInfo('/link')
    assert.equal(link.type, 'symlink')
    assert.equal(link.target, '/etc/passwd')
    await assert.rejects(vol.readFile('/link'), /400/)  // never followed on the host

    const info = await Sandbox.getInfo(s.sandboxId)
    assert.deepEqual(info.volumeMounts, [{ name: 'e2b-shared', path: '/data' }])
    const listed = await Sandbox.list().nextItems()
    const mine = listed.find((x) => x.sandboxId === s.sandboxId)
    assert.deepEqual(mine?.volumeMounts, [{ name: 'e2b-shared', path: '/data' }])

    // Refused while a sandbox mounts it.
    await assert.rejects(Volume.destroy(vol.volumeId), /409/)
  } finally {
    await s.kill()
  }
  assert.equal(await Volume.destroy(vol.volumeId), true)
  // A volume the tenant has not: the create is refused before anything boots.
  await assert.rejects(Sandbox.create('base', { volumeMounts: { '/data': 'no-such-volume' }, ...slow }), /404|not exist/)
})
