// The browser test of a rewind's fork in `dsh web` (driven by crates/cli/tests/all/web_rewind.rs):
// two pages on one session; one applies `/rewind 2 both yes`; both follow the fork (the other
// keeps its unsent draft), the next prompt runs there, and the old session's page, reloaded,
// links the fork and stays. Its last stdout line is {"result": …}.
import { createRequire } from 'node:module';
import path from 'node:path';

const env = (k) => {
  const v = process.env[k];
  if (!v) throw new Error(`${k} is not set`);
  return v;
};
const require = createRequire(path.join(env('DSH_PW_DIR'), 'index.js'));
const { chromium } = require('playwright-core');

const BASE = env('DSH_WEB_BASE');
const LOGIN = env('DSH_WEB_LOGIN');
const OLD = env('DSH_WEB_SESSION');
const DRAFT = 'a draft typed before the fork';

function check(cond, what) {
  if (!cond) throw new Error(`failed: ${what}`);
  console.error(`ok: ${what}`);
}

const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
try {
  const ctx = await browser.newContext({ viewport: { width: 1000, height: 800 } });
  const errors = [];
  const page = async () => {
    const p = await ctx.newPage();
    p.setDefaultTimeout(20000);
    p.on('pageerror', (e) => errors.push(String(e)));
    return p;
  };
  const a = await page();
  await a.goto(LOGIN);
  await a.waitForURL(`${BASE}/`);
  // The stored session is opened in the server (a page only watches what it finds open).
  const opened = await a.evaluate(async (id) => {
    const r = await fetch('/v1/sessions', {
      method: 'POST',
      headers: { 'x-dsh-web': '1', 'content-type': 'application/json' },
      body: JSON.stringify({ type: 'resume', sessionId: id }),
    });
    return r.status;
  }, OLD);
  check(opened === 200 || opened === 201, `the session opens in the server (${opened})`);
  const b = await page();
  for (const p of [a, b]) {
    await p.goto(`${BASE}/#/s/${encodeURIComponent(OLD)}`);
    await p.locator('#log').getByText('Second done.').waitFor();
    await p.locator('#conn[data-state="live"]').waitFor();
  }
  await b.locator('#prompt').fill(DRAFT);

  // The first page applies the rewind; both move to the fork.
  await a.locator('#prompt').fill('/rewind 2 both yes');
  await a.locator('#prompt').press('Enter');
  const forkOf = async (p) => {
    await p.waitForFunction((old) => location.hash.startsWith('#/s/') && !location.hash.includes(old), OLD);
    return decodeURIComponent((await p.evaluate(() => location.hash)).slice(4));
  };
  const fork = await forkOf(a);
  check(fork !== OLD && fork.startsWith('session-'), `the page that rewound shows the fork ${fork}`);
  check(await forkOf(b) === fork, 'the other page follows the same fork');
  for (const p of [a, b]) {
    await p.locator('#log').getByText('First done.').waitFor();
    await p.locator('#conn[data-state="live"]').waitFor();
    check(await p.locator('#log').getByText('write two').count() === 0, 'the fork has no dropped turn');
  }
  check(await b.locator('#prompt').inputValue() === DRAFT, 'the unsent draft moved with the page');

  // The next prompt runs in the fork; both pages see it. Typed once the fork is idle: while
  // it still reads working (the rewind's command), Enter would queue the text as a steer.
  await a.locator('#state .badge[data-state="idle"]').waitFor();
  await a.locator('#prompt').fill('write three');
  await a.locator('#prompt').press('Enter');
  for (const p of [a, b]) await p.locator('#log').getByText('Third done.').waitFor();
  check(true, 'the next prompt ran in the fork, shown on both pages');

  // The old session's page opened again: it links the fork and stays.
  const c = await page();
  await c.goto(`${BASE}/#/s/${encodeURIComponent(OLD)}`);
  const link = c.locator('#log .row.forked a.fork');
  await link.waitFor();
  check(await link.textContent() === fork, 'the old session links its fork');
  check((await c.locator('#log .row.forked').textContent()).includes('rewound to before turn 2'), 'it says to where');
  await c.locator('#log').getByText('Second done.').waitFor();
  check(decodeURIComponent(await c.evaluate(() => location.hash)) === `#/s/${OLD}`, 'a replayed fork does not move the page');
  check(errors.length === 0, `no page errors: ${errors.join('; ')}`);
  console.log(JSON.stringify({ result: { fork } }));
} finally {
  await browser.close();
}
