// E2B's Template builder through E2B's own JS SDK (e2b 2.51.0, pinned): an
// image on a registry on 127.0.0.1 (test_registry: busybox, umoci, skopeo,
// Debian's docker-registry), Template().fromImage(…).copy(…).runCmd(…)
// .setEnvs(…).setWorkdir(…).setUser(…).setStartCmd(…, waitForPort(…)) built
// with Template.build and its logs streamed, then Sandbox.create(name)
// with the start command serving; fromDockerfile through the same routes;
// the build status with logsOffset; tags; registries Vessel cannot pull
// from refused. Nothing leaves the machine.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { Sandbox, Template, waitForPort } from 'e2b-251'
import { Vesseld } from './vesseld.mjs'

let d
let registry // the helper process
let host // its host:port
let privateHost // the one behind a username and password
let ctx // the build context (the SDK's fileContextPath)
let built // Template.build's answer

function need(name) {
  const v = process.env[name]
  if (!v) throw new Error(`${name} is not set; run through \`make test\` (ctest sets it)`)
  return v
}

// Starts test_registry and reads the host:port it prints once it has pushed.
async function startRegistry() {
  registry = spawn(need('VESSEL_TEST_REGISTRY_PATH'), [], { stdio: ['pipe', 'pipe', 'inherit'] })
  return await new Promise((resolve, reject) => {
    let out = ''
    registry.stdout.on('data', (c) => {
      out += c
      if (out.includes('\n')) resolve(out.trim())
    })
    registry.on('exit', (code) => reject(new Error(`test_registry exited with ${code}`)))
  })
}

before(async () => {
  ;[host, privateHost] = (await startRegistry()).split(' ')
  d = await new Vesseld({ templates: ['minimal'], rest: true, egress: false }).start()
  ctx = fs.mkdtempSync(path.join(os.tmpdir(), 'vessel-e2b-ctx-'))
  fs.mkdirSync(path.join(ctx, 'app', 'sub'), { recursive: true })
  fs.writeFileSync(path.join(ctx, 'app', 'index.html'), 'hello from the template\n')
  fs.writeFileSync(path.join(ctx, 'app', 'sub', 'note.txt'), 'a note\n')
})

after(async () => {
  await d?.stop()
  registry?.stdin.end()
  if (ctx) fs.rmSync(ctx, { recursive: true, force: true })
})

test('Template.build from an image streams its logs; Sandbox.create starts its start command', async () => {
  const template = Template({ fileContextPath: ctx })
    .fromImage(`${host}/e2b/busybox:1`)
    .copy('app', '/app')
    .runCmd('echo "built by $(id -un)" > /tmp/who && cat /app/index.html')
    .setEnvs({ GREETING: 'hello' })
    .setWorkdir('/app')
    .runCmd('echo "$GREETING from $(pwd)" > greeting.txt')
    .setUser('root')
    .setStartCmd('httpd -f -p 8000 -h /app', waitForPort(8000))
  const logs = []
  built = await Template.build(template, 'e2b-built', {
    ...d.opts(),
    onBuildLogs: (e) => logs.push(e.message),
  })
  assert.equal(built.name, 'e2b-built')
  assert.match(built.buildId, /^[0-9a-f-]{36}$/)
  // The RUN's own output came through the status route's logEntries.
  assert.ok(logs.some((m) => m.includes('hello from the template')), logs.join('\n'))
  assert.ok(logs.some((m) => m.includes("Uploaded 'app'")), logs.join('\n'))
  assert.equal(await Template.exists('e2b-built', d.opts()), true)
  assert.equal(await Template.exists('e2b-never-built', d.opts()), false)

  const sb = await Sandbox.create('e2b-built', d.opts())
  try {
    const r = await d.sh(
      sb.sandboxId,
      'wget -qO- http://127.0.0.1:8000/index.html; cat /app/greeting.txt /tmp/who /app/sub/note.txt; ' +
        'stat -c "%U %a" /app/index.html; echo "env: $GREETING"',
      'root',
    )
    assert.equal(r.exitCode, 0, r.stderr)
    assert.match(r.stdout, /^hello from the template$/m, 'the start command serves /app')
    assert.match(r.stdout, /^hello from \/app$/m, 'ENV and WORKDIR applied to the later RUN')
    assert.match(r.stdout, /^built by user$/m, "E2B's default build user")
    assert.match(r.stdout, /^a note$/m, 'a directory copied whole')
    assert.match(r.stdout, /^user 644$/m, 'COPY owned by the USER in effect, modes kept')
    assert.match(r.stdout, /^env: hello$/m, 'ENV is the template default')
  } finally {
    await sb.kill()
  }
})

test('getBuildStatus pages the log with logsOffset; tags', async () => {
  const all = await Template.getBuildStatus(built, { ...d.opts(), logsOffset: 0 })
  assert.equal(all.status, 'ready')
  assert.ok(all.logEntries.length > 3)
  const rest = await Template.getBuildStatus(built, { ...d.opts(), logsOffset: all.logEntries.length })
  assert.equal(rest.logEntries.length, 0)
  const tail = await Template.getBuildStatus(built, { ...d.opts(), logsOffset: 2 })
  assert.equal(tail.logEntries[0].message, all.logEntries[2].message)

  const tagged = await Template.assignTags('e2b-built', ['prod', 'stable'], d.opts())
  assert.equal(tagged.buildId, built.buildId)
  let tags = (await Template.getTags('e2b-built', d.opts())).map((t) => t.tag).sort()
  assert.deepEqual(tags, ['prod', 'stable'])
  await Template.removeTags('e2b-built', 'stable', d.opts())
  tags = (await Template.getTags('e2b-built', d.opts())).map((t) => t.tag)
  assert.deepEqual(tags, ['prod'])
})

test('fromDockerfile goes through the same routes', async () => {
  const template = Template({ fileContextPath: ctx }).fromDockerfile(
    [
      `FROM ${host}/e2b/busybox:1`,
      'ENV WHO=dockerfile',
      'WORKDIR /srv',
      'COPY app/index.html /srv/',
      'RUN echo "from the $WHO in $(pwd) as $(id -un)" > made.txt',
    ].join('\n'),
  )
  const logs = []
  await Template.build(template, 'e2b-dockerfile', { ...d.opts(), onBuildLogs: (e) => logs.push(e.message) })
  const sb = await Sandbox.create('e2b-dockerfile', d.opts())
  try {
    const r = await d.sh(sb.sandboxId, 'cat /srv/made.txt /srv/index.html', 'root')
    assert.equal(r.exitCode, 0, r.stderr)
    assert.match(r.stdout, /^from the dockerfile in \/srv as root$/m)
    assert.match(r.stdout, /^hello from the template$/m)
  } finally {
    await sb.kill()
  }
})

test('fromImage with a username and password pulls a private image; force rebuilds', async () => {
  const wrong = Template().fromImage(`${privateHost}/e2b/private:1`, { username: 'e2b-user', password: 'nope' })
  await assert.rejects(Template.build(wrong, 'e2b-private', d.opts()), (e) => {
    assert.match(e.message, /refused/)
    assert.doesNotMatch(e.message, /nope/)
    return true
  })
  const right = Template()
    .fromImage(`${privateHost}/e2b/private:1`, { username: 'e2b-user', password: 'e2b-registry-pass-1234' })
    .runCmd('cat /proc/sys/kernel/random/uuid > /tmp/built-at')
  const logs = []
  await Template.build(right, 'e2b-private', { ...d.opts(), onBuildLogs: (e) => logs.push(e.message) })
  assert.equal(JSON.stringify(logs).includes('e2b-registry-pass-1234'), false, 'the password in a log')
  const builtAt = async () => {
    const sb = await Sandbox.create('e2b-private', d.opts())
    try {
      return (await d.sh(sb.sandboxId, 'cat /tmp/built-at', 'root')).stdout
    } finally {
      await sb.kill()
    }
  }
  const first = await builtAt()
  // The same template again is the same build; skipCache (the SDK's
  // force) builds it anew.
  await Template.build(right, 'e2b-private', d.opts())
  assert.equal(await builtAt(), first)
  await Template.build(right, 'e2b-private', { ...d.opts(), skipCache: true })
  assert.notEqual(await builtAt(), first)
})

test('a failing step fails the build with its output; AWS and GCP registries are refused', async () => {
  const failing = Template({ fileContextPath: ctx })
    .fromImage(`${host}/e2b/busybox:1`)
    .runCmd('echo about to fail; exit 3')
  await assert.rejects(Template.build(failing, 'e2b-failing', d.opts()), (e) => {
    assert.match(e.message, /exit 3/)
    assert.match(e.message, /about to fail/)
    return true
  })
  const aws = Template().fromAWSRegistry('123.dkr.ecr.us-east-1.amazonaws.com/app:1', {
    accessKeyId: 'a',
    secretAccessKey: 'b',
    region: 'us-east-1',
  })
  await assert.rejects(Template.build(aws, 'e2b-aws', d.opts()), /'aws' is not supported.*'registry'/)
  const gcp = Template().fromGCPRegistry('gcr.io/p/app:1', { serviceAccountJSON: { type: 'x' } })
  await assert.rejects(Template.build(gcp, 'e2b-gcp', d.opts()), /'gcp' is not supported/)
})
