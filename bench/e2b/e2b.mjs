// bench/e2b (issue 12): E2B's own JS SDK against Vessel, beside Vessel's
// native API in the same run. Per create: `Sandbox.create('base')` and a
// first `commands.run('true')` through the SDK (REST on the E2B port, then
// envd), against POST /v1/sandboxes {template: base}, its operation's event
// stream until done, a session and POST /v1/exec `true` on the data plane.
// The SDK runs every command as `/bin/bash -l -c <command>` (a login shell,
// as E2B's envd runs what it is given), so a third side runs exactly that
// on the native API: the SDK's path against the native one for the same
// guest work, and the first command alone (after the create) beside both.
// The two alternate, one create at a time, each after the warm pool has
// refilled (an idle node, as `make up` runs it: --warm-pool minimal=2,base=1,
// egress on), so the machine's noise falls on both alike. Every sandbox is
// deleted after its sample.
//
// Run: make bench (or `node bench/e2b/e2b.mjs` with the artifacts.env
// variables, VESSELD_PATH and VESSEL_CLI_PATH set). VESSEL_BENCH_E2B_N sets
// the samples per side (default 10). Prints a table; JSON in
// $VESSEL_BENCH_RESULTS/e2b.json.
import fs from 'node:fs'
import { createRequire } from 'node:module'
import path from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..')
// The SDK is the one tests/e2b pins (installed there by `npm ci`).
const require = createRequire(path.join(repo, 'tests/e2b/package.json'))
const { Sandbox } = await import(pathToFileURL(require.resolve('e2b')).href)
const { Vesseld } = await import(pathToFileURL(path.join(repo, 'tests/e2b/vesseld.mjs')).href)
const { stats } = await import(pathToFileURL(path.join(repo, 'bench/stats.mjs')).href)

const n = Number(process.env.VESSEL_BENCH_E2B_N ?? 10)
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))


async function waitPoolFull(d) {
  for (let i = 0; i < 600; i++) {
    const r = await fetch(`${d.vesselUrl}/metrics`)
    const m = await r.text()
    if (/vessel_warm_pool_vms\{template="base"\} [1-9]/.test(m)) return
    await sleep(100)
  }
  throw new Error('the warm pool never filled')
}

async function viaSdk(d) {
  const t0 = performance.now()
  const sbx = await Sandbox.create('base', d.opts())
  const created = performance.now()
  const r = await sbx.commands.run('true')
  const first = performance.now()
  if (r.exitCode !== 0) throw new Error(`sdk: true exited ${r.exitCode}`)
  await sbx.kill()
  return { create: created - t0, total: first - t0 }
}

async function viaNative(d, cmd = ['true']) {
  const t0 = performance.now()
  const c = await d.vessel('POST', '/v1/sandboxes', { template: 'base' })
  if (c.status !== 202) throw new Error(`native create: ${JSON.stringify(c)}`)
  const id = c.body.sandbox.id
  // The operation's event stream ends when the operation does.
  const ev = await fetch(`${d.vesselUrl}/v1/operations/${c.body.operation.id}/events`, {
    headers: { Authorization: `Bearer ${d.vesselKey}` },
  })
  const text = await ev.text()
  if (!text.includes('"done"')) throw new Error(`native create did not finish: ${text.slice(-300)}`)
  const created = performance.now()
  const s = await d.vessel('POST', `/v1/sandboxes/${id}/sessions`)
  if (s.status !== 201 && s.status !== 200) throw new Error(`session: ${JSON.stringify(s)}`)
  const x = await fetch(`${s.body.data_url}/v1/exec`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${s.body.token}` },
    body: JSON.stringify({ cmd }),
  })
  const out = await x.text()
  const first = performance.now()
  if (!/"exit_code":0/.test(out)) throw new Error(`native: ${cmd} did not exit 0: ${out.slice(-300)}`)
  const del = await d.vessel('DELETE', `/v1/sandboxes/${id}`)
  if (del.status === 202)
    await (await fetch(`${d.vesselUrl}/v1/operations/${del.body.operation.id}/events`, {
      headers: { Authorization: `Bearer ${d.vesselKey}` },
    })).text()
  return { create: created - t0, total: first - t0 }
}

const d = new Vesseld({ templates: ['minimal', 'base'], rest: true, envd: true, warmPool: 'minimal=2,base=1' })
let rc = 0
try {
  await d.start()
  process.env.E2B_SANDBOX_URL = d.envdUrl
  const sides = [
    ['sdk', viaSdk, { create: [], total: [], first: [] }],
    ['native', viaNative, { create: [], total: [], first: [] }],
    ['native-login', (v) => viaNative(v, ['/bin/bash', '-l', '-c', 'true']), { create: [], total: [], first: [] }],
  ]
  for (let i = 0; i < n; i++) {
    for (const [name, f, into] of sides) {
      await waitPoolFull(d)
      await sleep(1000)
      const r = await f(d)
      into.create.push(r.create)
      into.total.push(r.total)
      into.first.push(r.total - r.create)
      process.stderr.write(`${name} ${i + 1}/${n}: create ${r.create.toFixed(0)} ms, create + first command ${r.total.toFixed(0)} ms\n`)
    }
  }
  const [sdk, native, login] = sides.map((s) => s[2])
  const rows = [
    ['E2B SDK: Sandbox.create', stats(sdk.create)],
    ['E2B SDK: create + first commands.run', stats(sdk.total)],
    ['E2B SDK: first commands.run (`true`: bash -l -c true)', stats(sdk.first)],
    ['native API: create until running', stats(native.create)],
    ['native API: create + first exec', stats(native.total)],
    ['native API: first exec (`true`)', stats(native.first)],
    ['native API: create + first exec of the SDK\'s bash -l -c true', stats(login.total)],
    ['native API: first exec of the SDK\'s bash -l -c true', stats(login.first)],
  ]
  console.log('\n| path (template base, warm pool, one at a time) | n | p50 ms | p99 ms | max ms |')
  console.log('|---|---|---|---|---|')
  for (const [name, s] of rows)
    console.log(`| ${name} | ${s.n} | ${s.p50.toFixed(0)} | ${s.p99.toFixed(0)} | ${s.max.toFixed(0)} |`)
  const dir = process.env.VESSEL_BENCH_RESULTS || path.join(repo, 'bench/results')
  fs.mkdirSync(dir, { recursive: true })
  const file = path.join(dir, 'e2b.json')
  fs.writeFileSync(
    file,
    JSON.stringify({ benchmark: 'e2b', accel: 'tcg', rows: rows.map(([scenario, s]) => ({ scenario, ...s })) }) + '\n',
  )
  console.log(`results written to ${file}`)
} catch (e) {
  console.error(`bench/e2b: ${e.stack ?? e}\n${d.log()}`)
  rc = 1
} finally {
  await d.stop()
}
process.exit(rc)
