// bench/ports (issues 22 and 25): the sandbox-ports proxy's throughput and
// added latency, for one or more vesseld builds in one run (VESSELD_PATHS,
// `label=path,label=path`, for example the commit before a change and
// after it; default `current=$VESSELD_PATH`). Rounds alternate between the
// builds (A B A B ...) so the machine's noise falls on each alike.
//
// Per round: a fresh vesseld, one `base` sandbox made with E2B's own SDK,
// a Python http.server in it on port 8000 serving a 16 MiB file and a
// 2-byte one. Through the proxy (`sandbox.getHost(8000)` on the envd
// listener, plain http): the big file's throughput, small GETs on one
// keep-alive connection and on a new connection each (p50/p99). Beside
// them, the same 16 MiB read over the agent channel without the proxy
// (envd's files API, the SDK's `files.read`), and a small GET made inside
// the guest to its own server (python's urllib over the guest's loopback,
// timed in the guest): what the guest costs without any host in the path.
//
// Run: node bench/ports/ports.mjs with the artifacts.env variables and
// VESSEL_CLI_PATH set (scripts/bench.sh does). VESSEL_BENCH_PORTS_ROUNDS
// (default 2 per build). Prints a table; JSON in $VESSEL_BENCH_RESULTS/ports.json.
import fs from 'node:fs'
import http from 'node:http'
import { createRequire } from 'node:module'
import path from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..')
const require = createRequire(path.join(repo, 'tests/e2b/package.json'))
const { Sandbox } = await import(pathToFileURL(require.resolve('e2b')).href)
const { Vesseld } = await import(pathToFileURL(path.join(repo, 'tests/e2b/vesseld.mjs')).href)
const { stats } = await import(pathToFileURL(path.join(repo, 'bench/stats.mjs')).href)

const rounds = Number(process.env.VESSEL_BENCH_PORTS_ROUNDS ?? 2)
const builds = (process.env.VESSELD_PATHS ?? `current=${process.env.VESSELD_PATH}`)
  .split(',')
  .map((s) => {
    const at = s.indexOf('=')
    if (at < 1) throw new Error(`VESSELD_PATHS: want label=path, got ${s}`)
    return { label: s.slice(0, at), path: s.slice(at + 1) }
  })
const kBig = 16 << 20
const kSmallN = 200
const kFreshN = 50
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))


// One GET; resolves with the status and the byte count (the body is
// counted, not kept).
function get(url, agent) {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { agent }, (res) => {
      let bytes = 0
      res.on('data', (c) => (bytes += c.length))
      res.on('end', () => resolve({ status: res.statusCode, bytes }))
      res.on('error', reject)
    })
    req.on('error', reject)
  })
}

async function untilServed(url) {
  const deadline = Date.now() + 60_000
  for (;;) {
    const r = await get(url, false).catch(() => ({ status: 0 }))
    if (r.status === 200) return
    if (Date.now() > deadline) throw new Error(`${url}: not served (status ${r.status})`)
    await sleep(250)
  }
}

async function round(build) {
  process.env.VESSELD_PATH = build.path
  const d = new Vesseld({ templates: ['minimal', 'base'], rest: true, envd: true })
  try {
    await d.start()
    process.env.E2B_SANDBOX_URL = d.envdUrl
    const sbx = await Sandbox.create('base', d.opts())
    try {
      await sbx.commands.run(
        `mkdir -p /home/user/www && cd /home/user/www && head -c ${kBig} /dev/zero > big && printf ok > small`,
      )
      await sbx.commands.run('cd /home/user/www && python3 -m http.server 8000', { background: true })
      const base = `http://${sbx.getHost(8000)}`
      await untilServed(`${base}/small`)
      const out = {}
      // Throughput: the big file through the proxy, then over envd's files API.
      let t = performance.now()
      const big = await get(`${base}/big`, false)
      if (big.status !== 200 || big.bytes !== kBig) throw new Error(`big: ${big.status} ${big.bytes} bytes`)
      out.proxy_mib_s = kBig / (1 << 20) / ((performance.now() - t) / 1000)
      t = performance.now()
      const viaFiles = await sbx.files.read('/home/user/www/big', { format: 'bytes' })
      if (viaFiles.length !== kBig) throw new Error(`files.read: ${viaFiles.length} bytes`)
      out.files_mib_s = kBig / (1 << 20) / ((performance.now() - t) / 1000)
      // Small GETs on one keep-alive connection, then a new connection each.
      const keep = new http.Agent({ keepAlive: true, maxSockets: 1 })
      const small = []
      for (let i = 0; i < kSmallN; i++) {
        t = performance.now()
        const r = await get(`${base}/small`, keep)
        if (r.status !== 200) throw new Error(`small: ${r.status}`)
        small.push(performance.now() - t)
      }
      keep.destroy()
      const fresh = []
      for (let i = 0; i < kFreshN; i++) {
        t = performance.now()
        const r = await get(`${base}/small`, false)
        if (r.status !== 200) throw new Error(`fresh: ${r.status}`)
        fresh.push(performance.now() - t)
      }
      // Inside the guest, to its own server: what no host path can beat.
      const inGuest = await sbx.commands.run(
        `python3 -c "
import time, urllib.request
s = []
for i in range(${kFreshN}):
    t = time.monotonic(); urllib.request.urlopen('http://127.0.0.1:8000/small').read(); s.append((time.monotonic() - t) * 1000)
s.sort(); print(s[len(s) // 2])"`,
      )
      out.small_keepalive = stats(small)
      out.small_fresh = stats(fresh)
      out.in_guest_p50 = Number(inGuest.stdout.trim())
      return out
    } finally {
      await sbx.kill().catch(() => {})
    }
  } finally {
    await d.stop()
  }
}

const results = Object.fromEntries(builds.map((b) => [b.label, []]))
let rc = 0
try {
  for (let r = 0; r < rounds; r++)
    for (const b of builds) {
      const o = await round(b)
      results[b.label].push(o)
      process.stderr.write(
        `${b.label} round ${r + 1}/${rounds}: proxy ${o.proxy_mib_s.toFixed(1)} MiB/s, files ${o.files_mib_s.toFixed(1)} MiB/s, ` +
          `keep-alive p50 ${o.small_keepalive.p50.toFixed(1)} ms, fresh p50 ${o.small_fresh.p50.toFixed(1)} ms, ` +
          `in guest p50 ${o.in_guest_p50.toFixed(1)} ms\n`,
      )
    }
  const median = (v) => stats(v).p50
  const rows = builds.map((b) => {
    const rs = results[b.label]
    return {
      build: b.label,
      rounds: rs.length,
      proxy_mib_s: median(rs.map((o) => o.proxy_mib_s)),
      files_mib_s: median(rs.map((o) => o.files_mib_s)),
      keepalive_p50_ms: median(rs.map((o) => o.small_keepalive.p50)),
      keepalive_p99_ms: median(rs.map((o) => o.small_keepalive.p99)),
      fresh_p50_ms: median(rs.map((o) => o.small_fresh.p50)),
      fresh_p99_ms: median(rs.map((o) => o.small_fresh.p99)),
      in_guest_p50_ms: median(rs.map((o) => o.in_guest_p50)),
    }
  })
  console.log(
    '\n| build | rounds | proxy MiB/s (16 MiB GET) | agent channel MiB/s (files.read) | keep-alive GET p50/p99 ms | new-connection GET p50/p99 ms | in-guest GET p50 ms |',
  )
  console.log('|---|---|---|---|---|---|---|')
  for (const r of rows)
    console.log(
      `| ${r.build} | ${r.rounds} | ${r.proxy_mib_s.toFixed(1)} | ${r.files_mib_s.toFixed(1)} | ` +
        `${r.keepalive_p50_ms.toFixed(1)} / ${r.keepalive_p99_ms.toFixed(1)} | ${r.fresh_p50_ms.toFixed(1)} / ${r.fresh_p99_ms.toFixed(1)} | ` +
        `${r.in_guest_p50_ms.toFixed(1)} |`,
    )
  const dir = process.env.VESSEL_BENCH_RESULTS || path.join(repo, 'bench/results')
  fs.mkdirSync(dir, { recursive: true })
  const file = path.join(dir, 'ports.json')
  fs.writeFileSync(file, JSON.stringify({ benchmark: 'ports', accel: 'tcg', rows, raw: results }) + '\n')
  console.log(`results written to ${file}`)
} catch (e) {
  console.error(`bench/ports: ${e.stack ?? e}`)
  rc = 1
}
process.exit(rc)
