// Drives the web console in Debian's chromium (playwright-core; no browser
// of its own) against a running vesseld, as a person would: sign in,
// create a sandbox and see it appear, `echo hi` in its terminal, upload a
// file and download it back, delete the sandbox; a screenshot of each page.
// Run by tests/integration/console_test.cc, which starts the vesseld.
//
// Environment: VESSEL_CONSOLE_URL (the API listener, http://host:port),
// VESSEL_API_KEY, VESSEL_SCREENSHOT_DIR. Prints `sandbox <id>` once it
// knows it; exits non-zero with the reason on the first failed step.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { chromium } from 'playwright-core'

const base = process.env.VESSEL_CONSOLE_URL
const apiKey = process.env.VESSEL_API_KEY
const shots = process.env.VESSEL_SCREENSHOT_DIR
if (!base || !apiKey || !shots) throw new Error('VESSEL_CONSOLE_URL, VESSEL_API_KEY and VESSEL_SCREENSHOT_DIR must be set')
fs.mkdirSync(shots, { recursive: true })

const step = (what) => console.log(`step: ${what}`)
const origin = new URL(base).origin
const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'vessel-console-chromium-'))
const context = await chromium.launchPersistentContext(profile, {
  executablePath: '/usr/bin/chromium',
  headless: true,
  acceptDownloads: true,
  viewport: { width: 1280, height: 900 },
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--disable-quic'],
})
const offsite = []
const cspViolations = []
const pageErrors = []
try {
  const page = context.pages()[0] ?? (await context.newPage())
  page.setDefaultTimeout(30_000)
  // Nothing the page loads may come from elsewhere (no CDN, no fonts).
  page.on('request', (r) => {
    const u = new URL(r.url())
    if (!['data:', 'blob:'].includes(u.protocol) && u.origin !== origin) offsite.push(r.url())
  })
  page.on('console', (m) => {
    if (/Content.Security.Policy/i.test(m.text())) cspViolations.push(m.text())
  })
  page.on('pageerror', (e) => pageErrors.push(String(e)))
  page.on('dialog', (d) => d.accept())
  const shot = (name) => page.screenshot({ path: path.join(shots, `${name}.png`), fullPage: true })

  step('sign in')
  await page.goto(`${base}/console`)
  await page.getByLabel('API key').waitFor()
  await shot('signin')
  await page.getByLabel('API key').fill('vsk_not_a_key')
  await page.click('#signin')
  await page.getByText('That key is not valid.').waitFor()
  await page.getByLabel('API key').fill(apiKey)
  await page.click('#signin')
  await page.locator('#sandboxes').waitFor()
  const stored = await page.evaluate(() => ({ session: sessionStorage.getItem('vessel.key'), local: localStorage.length }))
  if (stored.session !== apiKey || stored.local !== 0) throw new Error(`the key is not (only) in session storage: ${JSON.stringify(stored)}`)

  step('create a sandbox and see it appear')
  await page.locator('select[name=template] option[value=minimal]').waitFor({ state: 'attached' })
  await page.selectOption('select[name=template]', 'minimal')
  await page.click('#create')
  const row = page.locator('#sandboxes tr[data-sandbox]').first()
  await row.waitFor()
  const id = await row.getAttribute('data-sandbox')
  console.log(`sandbox ${id}`)
  // Running arrives over the event stream; the page is not reloaded.
  await page.locator(`#sandboxes tr[data-sandbox="${id}"][data-state=running]`).waitFor({ timeout: 120_000 })
  // Its memory and CPU as its node measures them, and where it runs.
  await page.locator(`#sandboxes tr[data-sandbox="${id}"] td.memory`, { hasText: '/ 256 MiB' }).waitFor({ timeout: 30_000 })
  await page.locator(`#sandboxes tr[data-sandbox="${id}"] td.cpu`, { hasText: '% of 1' }).waitFor()
  await page.locator(`#sandboxes tr[data-sandbox="${id}"] td`, { hasText: 'this machine' }).waitFor()
  await shot('sandboxes')

  step('echo hi in the terminal')
  await page.click(`a[href="#/sandbox/${id}"]`)
  await page.getByText(/shell pid \d+/).waitFor()
  await page.locator('#terminal .xterm').click()
  await page.keyboard.type('echo hi\n')
  await page.waitForFunction(() => {
    const rows = document.querySelector('#terminal .xterm-rows')
    return rows && [...rows.children].some((r) => r.textContent.trim() === 'hi')
  })
  await shot('terminal')

  step('upload a file and download it back')
  await page.getByRole('tab', { name: 'Files' }).click()
  await page.getByLabel('directory').fill('/tmp')
  const content = `uploaded from the console ${Date.now()}\n`
  await page.getByLabel('upload').setInputFiles({ name: 'console-upload.txt', mimeType: 'text/plain', buffer: Buffer.from(content) })
  await page.getByRole('button', { name: 'Upload', exact: true }).click()
  const fileRow = page.locator('tr[data-file="console-upload.txt"]')
  await fileRow.waitFor()
  const [download] = await Promise.all([page.waitForEvent('download'), fileRow.getByRole('button', { name: 'Download' }).click()])
  const got = fs.readFileSync(await download.path(), 'utf8')
  if (got !== content) throw new Error(`downloaded ${JSON.stringify(got)}, uploaded ${JSON.stringify(content)}`)
  await shot('files')

  step('logs and metrics')
  await page.getByRole('tab', { name: 'Logs' }).click()
  await page.waitForFunction(() => /command start/.test(document.querySelector('pre.log')?.textContent ?? ''))
  await shot('logs')
  await page.getByRole('tab', { name: 'Metrics' }).click()
  await page.getByText(/load average/).waitFor()
  await page.getByText(/MiB resident of 256\.0 MiB/).waitFor()
  await shot('metrics')

  step('templates and operator pages')
  await page.click('a[href="#/templates"]')
  await page.getByRole('cell', { name: 'minimal', exact: true }).first().waitFor()
  await shot('templates')
  // This key is an operator's (console_test starts vesseld so): the page
  // is linked, and lists this machine as its one node.
  await page.locator('#operator-link').waitFor({ state: 'visible' })
  await page.click('a[href="#/operator"]')
  await page.getByText('Sandboxes by state (every tenant)').waitFor()
  await page.getByRole('heading', { name: 'Nodes' }).waitFor()
  await page.getByRole('cell', { name: 'ready', exact: true }).first().waitFor()
  await shot('operator')

  step('delete the sandbox')
  await page.goto(`${base}/console#/sandbox/${id}`)
  await page.locator('button[data-action=delete]').click()
  await page.locator('#sandboxes').waitFor()
  await page.locator(`#sandboxes tr[data-sandbox="${id}"][data-state=running]`).waitFor({ state: 'detached', timeout: 60_000 })
  await shot('deleted')

  if (offsite.length) throw new Error(`requests left the origin: ${offsite.join(', ')}`)
  if (pageErrors.length) throw new Error(`page errors: ${pageErrors.join('; ')}`)
  console.log(`csp violations: ${cspViolations.length}`)
  for (const v of cspViolations) console.log(`csp: ${v}`)
  console.log('console: ok')
} finally {
  await context.close()
  fs.rmSync(profile, { recursive: true, force: true })
}
