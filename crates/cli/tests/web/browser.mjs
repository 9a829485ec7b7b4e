// The browser test of `dsh web` (driven by crates/cli/tests/all/web.rs): Playwright
// (playwright-core) drives Debian's chromium, headless, against a real `dsh web --no-open` on the
// testkit mock. The Rust side holds the mock's gates: this script prints {"gate": NAME} and
// waits for "ok" on stdin. Its last stdout line is {"result": …}.
import { createRequire } from 'node:module';
import path from 'node:path';
import readline from 'node:readline';

const env = (k) => {
  const v = process.env[k];
  if (!v) throw new Error(`${k} is not set`);
  return v;
};
const require = createRequire(path.join(env('DSH_PW_DIR'), 'index.js'));
const { chromium } = require('playwright-core');

const BASE = env('DSH_WEB_BASE');
const LOGIN = env('DSH_WEB_LOGIN');
const RO_TOKEN = env('DSH_WEB_RO_TOKEN');
const CWD = env('DSH_WEB_CWD');
const OUT = env('DSH_WEB_OUT');
const STEER = 'also check the docs';
const LONG = env('DSH_WEB_LONG');
const LONG_TURNS = Number(env('DSH_WEB_LONG_TURNS'));

const lines = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]();
async function gate(name) {
  console.log(JSON.stringify({ gate: name }));
  const { value } = await lines.next();
  if (value !== 'ok') throw new Error(`gate ${name}: got ${value}`);
}
/** Waits for `target`; an ordinary approval asked before it (the policy's) is allowed once. */
async function allowFirst(p, target) {
  const policy = '.card.approval:not(.resolved):not(.plan-review)';
  await p.locator(`${target}, ${policy}`).first().waitFor();
  if (await p.locator(policy).count()) {
    await p.locator(policy).getByRole('button', { name: 'Allow once' }).click();
  }
  await p.locator(target).waitFor();
}
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
const result = { requests: 0, foreignRequests: [], assetBytes: {}, screenshots: [] };
const origin = new URL(BASE).origin;
const watch = (ctx) => ctx.on('request', (r) => {
  result.requests++;
  const u = new URL(r.url());
  if (u.origin !== origin && u.protocol !== 'data:') result.foreignRequests.push(r.url());
});

try {
  // ---- refusals without a sign-in ----
  const anon = await browser.newContext();
  watch(anon);
  const ap = await anon.newPage();
  let r = await ap.goto(`${BASE}/`);
  check(r.status() === 401 && await ap.locator('#login-note').isVisible(), 'the page without a sign-in is the login page (401)');
  r = await anon.request.get(`${BASE}/v1/sessions`);
  check(r.status() === 401, 'the API without a sign-in answers 401');
  r = await ap.goto(`${BASE}/login?token=dshl_not-a-token`);
  check(r.status() === 401, 'a made-up login link is refused');

  // ---- sign in with the one-time link ----
  const ctx = await browser.newContext({ viewport: { width: 1100, height: 820 }, colorScheme: 'light' });
  watch(ctx);
  const page = await ctx.newPage();
  page.setDefaultTimeout(20000);
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(LOGIN);
  await page.waitForURL(`${BASE}/`);
  await page.locator('#session-list').waitFor();
  // What the page loads (the page and its assets, from the browser's resource timing), each
  // body's size as the server sends it (no compression).
  const loaded = await page.evaluate(() => [...performance.getEntriesByType('navigation'), ...performance.getEntriesByType('resource')]
    .map((e) => new URL(e.name).pathname).filter((p) => p === '/' || p.startsWith('/assets/')));
  for (const p of loaded) result.assetBytes[p] = (await (await ctx.request.get(`${BASE}${p}`)).body()).length;
  const cookie = (await ctx.cookies()).find((c) => c.name.startsWith('dsh_web_'));
  check(cookie && cookie.httpOnly && cookie.sameSite === 'Strict', 'the sign-in cookie is HttpOnly and SameSite=Strict');
  r = await ap.goto(LOGIN);
  check(r.status() === 401, 'the login link works once');
  // ---- a 1,000-turn stored session opens on its last page ----
  {
    // Its figures are medians of several loads (DSH_WEB_LOADS, default 3); the last one stays
    // open for the checks.
    const loads = Number(process.env.DSH_WEB_LOADS || 3);
    const runs = [];
    let lp = null;
    for (let i = 0; i < loads; i++) {
      await lp?.close();
      lp = await ctx.newPage();
      lp.setDefaultTimeout(60000);
      lp.on('pageerror', (e) => errors.push(String(e)));
      await lp.goto(`${BASE}/#/s/${encodeURIComponent(LONG)}`);
      await lp.locator('#earlier:not([hidden])').waitFor();
      runs.push(await lp.evaluate(() => ({
        fcp: performance.getEntriesByName('first-contentful-paint')[0]?.startTime,
        firstEvent: performance.getEntriesByName('dsh-first-event')[0]?.startTime,
        replayed: performance.getEntriesByName('dsh-replayed')[0]?.startTime,
        transcript: performance.getEntriesByName('dsh-transcript')[0]?.startTime,
      })));
    }
    const median = (k) => {
      const xs = runs.map((r) => r[k]).filter((x) => x !== undefined).sort((a, b) => a - b);
      return xs.length ? xs[Math.floor(xs.length / 2)].toFixed(1) : 'none';
    };
    result.longSession = {
      turns: LONG_TURNS, loads, fcpMs: median('fcp'), firstEventMs: median('firstEvent'),
      replayedMs: median('replayed'), transcriptMs: median('transcript'),
    };
    console.error(`long session: ${JSON.stringify(result.longSession)}`);
    const users = () => lp.locator('#log .msg.user').count();
    check(await users() === 50, `a ${LONG_TURNS}-turn session opens with its last 50 turns drawn (${await users()})`);
    check(await lp.locator('#earlier').textContent() === `Show earlier turns (${LONG_TURNS - 50} more)`, 'the earlier turns wait behind a button');
    check(await lp.locator('#log .card.tool[data-kind="shell"]').count() === 50, 'each drawn turn has its bash card');
    const code = lp.locator('#log .msg.assistant pre.code[data-lang="rust"]').last();
    check(await code.locator('.tok-kw', { hasText: 'fn' }).count() === 1
      && await code.locator('.tok-str').textContent() === '"hi"'
      && await code.textContent() === 'fn main() { println!("hi"); }', 'a rust code block is highlighted (keyword, string) and its text unchanged');
    await lp.locator('#earlier').click();
    await lp.locator('#earlier', { hasText: `(${LONG_TURNS - 100} more)` }).waitFor();
    check(await users() === 100, 'Show earlier fetches the page before the tail and draws it above');
    const order = await lp.evaluate(() => [...document.querySelectorAll('#log > :not(#earlier)')][0].className);
    check(/msg user/.test(order), `the page drawn above starts with its turn's prompt (${order})`);
    await lp.close();
  }

  const csrf = await page.evaluate(async () => (await fetch('/v1/sessions', {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}',
  })).status);
  check(csrf === 403, 'a cookie request without the page header that changes something is refused (403)');

  // ---- a new session from the form ----
  await page.locator('details.new summary').click();
  await page.fill('input[name="cwd"]', CWD);
  await page.selectOption('select[name="approvalPolicy"]', 'untrusted');
  await page.fill('textarea[name="prompt"]', 'hello');
  await page.click('#new-session button[type="submit"]');
  await page.waitForURL(/#\/s\//);
  const url = page.url();

  // ---- streamed text; reload mid-stream; a second tab ----
  await page.locator('#live', { hasText: 'Streaming the first half' }).waitFor();
  await page.reload();
  await page.locator('#live', { hasText: 'Streaming the first half' }).waitFor();
  check(await page.locator('.msg.user', { hasText: 'hello' }).count() === 1, 'after a reload mid-stream the prompt shows once');
  const tab2 = await ctx.newPage();
  tab2.setDefaultTimeout(20000);
  await tab2.goto(url);
  await tab2.locator('#live', { hasText: 'Streaming the first half' }).waitFor();
  await gate('stream');
  const final = 'Streaming the first half, then the rest.';
  await page.locator('.msg.assistant:not(.live)', { hasText: final }).waitFor();
  await tab2.locator('.msg.assistant:not(.live)', { hasText: final }).waitFor();
  check(await page.locator('.msg.assistant', { hasText: 'Streaming the first half' }).count() === 1,
    'the streamed answer shows once, whole, after the reload');
  await page.locator('[data-state="idle"]').first().waitFor();

  // ---- a bash call: approval inline, output and exit code, markup inert ----
  await page.locator('#prompt').fill('run it');
  await page.locator('#prompt').press('Enter');
  const approval = page.locator('.card.approval:not(.resolved)');
  await approval.waitFor();
  await tab2.locator('.card.approval:not(.resolved)').waitFor();
  await approval.getByRole('button', { name: 'Allow once' }).click();
  await tab2.locator('.card.approval.resolved [data-outcome="allowed-once"]').waitFor();
  check(true, 'an approval clicked in one tab resolves in the other');
  const shell = page.locator('.card.tool[data-kind="shell"]').last();
  await shell.locator('.exit', { hasText: 'exit 3' }).waitFor();
  const out = await shell.locator('pre.output').textContent();
  check(out.includes('<script>window.__pwned=1</script>') && out.includes('onerror='), 'the bash card shows its output as text');
  await page.locator('.msg.assistant', { hasText: 'The command failed with exit 3.' }).waitFor();
  check(await page.evaluate(() => window.__pwned) === undefined, 'markup in tool output did not run');
  check(await page.locator('#log script, #log img').count() === 0, 'markup in tool output made no element');

  // ---- an edit as a coloured diff ----
  await page.locator('#prompt').fill('edit it');
  await page.locator('#prompt').press('Enter');
  await page.locator('.card.approval:not(.resolved)').getByRole('button', { name: 'Allow always' }).click();
  const edit = page.locator('.card.tool[data-kind="edit"]').last();
  await edit.locator('pre.diff .add', { hasText: 'new line' }).waitFor();
  check(await edit.locator('pre.diff .del', { hasText: 'old line' }).count() === 1, 'the edit shows a diff (removed and added lines)');
  await page.locator('.msg.assistant', { hasText: 'Edited.' }).waitFor();

  // ---- `@` completion offers the paths this session's tools named ----
  await page.locator('#prompt').fill('compare @a');
  await page.locator('#completions li[data-path="a.txt"]').click();
  check(await page.locator('#prompt').inputValue() === 'compare @a.txt ', '@ completes a path the session\'s tools named');
  // ... and the files of the session's directory (the server's listing, ignored files left out).
  await page.locator('#prompt').fill('see @guid');
  await page.locator('#completions li[data-path="docs/guide.md"]').click();
  check(await page.locator('#prompt').inputValue() === 'see @docs/guide.md ', '@ completes a file of the session\'s directory from the server\'s listing');
  const listing = await page.evaluate(async (u) => {
    const get = async (q) => { const r = await fetch(`/v1/sessions/${u}/files?${q}`); return { status: r.status, body: await r.json() }; };
    return { ignored: await get('q=debug'), listed: await get('q=guide'), up: await get('dir=..') };
  }, url.split('#/s/')[1]);
  check(listing.listed.status === 200 && listing.listed.body.files.includes('docs/guide.md')
    && listing.ignored.status === 200 && listing.ignored.body.files.length === 0, 'a file the .gitignore names is not listed');
  check(listing.up.status === 400 && listing.up.body.message.includes('..'), `a listing outside the directory is refused (${listing.up.body.message})`);
  await page.locator('#prompt').fill('');

  // ---- a steer typed mid-turn reaches the next request ----
  await page.locator('#prompt').fill('long task');
  await page.locator('#prompt').press('Enter');
  await page.locator('#state [data-state="working"]').waitFor();
  await page.locator('#prompt').fill(STEER);
  await page.locator('#prompt').press('Enter');
  await page.locator('.steer', { hasText: STEER }).waitFor();
  await tab2.locator('.steer', { hasText: STEER }).waitFor();
  check(true, 'a steer typed mid-turn is shown queued (in both tabs)');
  await gate('steer');
  await page.locator('.msg.assistant', { hasText: 'Steer received.' }).waitFor();
  await page.locator('#state [data-state="idle"]').waitFor();
  check(await page.locator('.steer').count() === 0, 'the delivered steer left the queue');

  // ---- two tabs in step ----
  await tab2.locator('.msg.assistant', { hasText: 'Steer received.' }).waitFor();
  const shape = (p) => p.evaluate(() => [...document.querySelectorAll('#log > *')].map((e) => e.className).join('|'));
  check(await shape(page) === await shape(tab2), 'the two tabs show the same transcript');

  // ---- status ----
  const status = await page.locator('#status').textContent();
  check(/cache hit/.test(status) && /cost/.test(status) && /tokens/.test(status), 'the status line shows tokens, cache hit and cost');

  // ---- a question answered in the page ----
  await page.locator('#prompt').fill('ask me');
  await page.locator('#prompt').press('Enter');
  // Under the untrusted policy the server may first ask to allow the question tool itself.
  await allowFirst(page, '.card.question-card:not(.resolved)');
  const question = page.locator('.card.question-card:not(.resolved)');
  await question.waitFor();
  await tab2.locator('.card.question-card:not(.resolved)').waitFor();
  await question.getByLabel('B', { exact: true }).check();
  await question.locator('input.other').fill('because tests');
  await question.getByRole('button', { name: 'Answer' }).click();
  await page.locator('.card.question-card.resolved [data-outcome="answered"]', { hasText: 'B, because tests' }).waitFor();
  await tab2.locator('.card.question-card.resolved [data-outcome="answered"]').waitFor();
  check(true, 'a question is answered in the page (an option and free text), resolved in both tabs');
  await page.locator('.msg.assistant', { hasText: 'You chose B.' }).waitFor();
  await page.locator('#state [data-state="idle"]').waitFor();

  // ---- slash-command completion from the registry; plan review ----
  await page.locator('#prompt').fill('/pl');
  await page.locator('#completions li[data-name="plan"]').waitFor();
  await page.locator('#prompt').press('Tab');
  check(await page.locator('#prompt').inputValue() === '/plan ', 'Tab completes a slash command from the session\'s registry');
  await page.locator('#prompt').fill('/pla');
  await page.locator('#completions li[data-name="plan"]').waitFor();
  await page.locator('#prompt').press('Enter');
  check(await page.locator('#prompt').inputValue() === '/plan ', 'Enter on a partial command completes it instead of sending it');
  await page.locator('#prompt').press('Enter');
  await page.locator('.row.command', { hasText: '/plan' }).waitFor();
  await page.locator('#prompt').fill('make a plan');
  await page.locator('#prompt').press('Enter');
  await allowFirst(page, '.card.approval.plan-review:not(.resolved)');
  const review = page.locator('.card.approval.plan-review:not(.resolved)');
  await review.waitFor();
  check(await review.locator('.plan li strong', { hasText: 'old' }).count() === 1, 'plan review shows the plan as markdown');
  await review.getByRole('button', { name: 'Accept plan' }).click();
  await page.locator('.card.approval.plan-review.resolved [data-outcome="allowed-once"]').waitFor();
  await page.locator('.msg.assistant', { hasText: 'Plan accepted.' }).waitFor();
  await page.locator('#state [data-state="idle"]').waitFor();
  check(true, 'a plan accepted from the page');
  await page.locator('.card.question-card').first().evaluate((el) => el.scrollIntoView({ block: 'start' }));
  await page.screenshot({ path: `${OUT}/question-and-plan-desktop.png` });
  result.screenshots.push('question-and-plan-desktop.png');

  // ---- a sub-agent card opens the child's transcript ----
  await page.locator('#prompt').fill('delegate it');
  await page.locator('#prompt').press('Enter');
  await allowFirst(page, '.card.tool[data-kind="agent"] .child');
  await page.locator('.msg.assistant', { hasText: 'Sub-agent done.' }).waitFor();
  await page.locator('#state [data-state="idle"]').waitFor();
  const agent = page.locator('.card.tool[data-kind="agent"]').last();
  await agent.locator('.child-toggle').click();
  await agent.locator('.child-log .msg.assistant', { hasText: 'The child found docs/guide.md.' }).waitFor();
  check(await agent.locator('.child-log .msg.user', { hasText: 'list the docs' }).count() === 1,
    'a sub-agent card opens the child\'s transcript inline (its prompt and answer)');
  const childHref = await agent.locator('.child a').getAttribute('href');
  check(/^#\/s\/./.test(childHref) && childHref !== new URL(url).hash, `the sub-agent card links to the child's own session (${childHref})`);
  await agent.locator('.child-toggle').click();
  check(await agent.locator('.child-log').isHidden(), 'the child transcript folds away again');

  // ---- a workflow call's card shows its run ----
  await page.locator('#prompt').fill('run the workflow');
  await page.locator('#prompt').press('Enter');
  await allowFirst(page, '.card.tool .workflow');
  await page.locator('.msg.assistant', { hasText: 'Workflow done.' }).waitFor();
  const wf = page.locator('.card.tool .workflow').last();
  await wf.locator('.wf-agent[data-state="completed"]').waitFor();
  const wfAgent = await wf.locator('.wf-agent').textContent();
  check(await wf.getAttribute('data-status') === 'completed' && await wf.locator('.wf-agent').count() === 1
    && /counter/.test(wfAgent) && /completed/.test(wfAgent) && /\d tokens/.test(wfAgent),
  `a workflow call's card shows its run: its one agent, completed, with its tokens (${wfAgent})`);
  check(/^#\/s\/./.test(await wf.locator('.wf-agent a').getAttribute('href')), 'the workflow\'s agent links to its session');

  // ---- interrupt ----
  await page.locator('#prompt').fill('stall');
  await page.locator('#prompt').press('Enter');
  await page.locator('#live', { hasText: 'Thinking hard' }).waitFor();
  await page.locator('#interrupt').click();
  await page.locator('.msg.assistant.interrupted', { hasText: 'Thinking hard' }).waitFor();
  await page.locator('#state [data-state="idle"]').waitFor();
  check(await page.locator('#interrupt').isHidden(), 'the interrupt button stops the turn; the streamed text is kept, marked interrupted');

  // ---- screenshots: desktop (light), phone (light and dark) ----
  await page.locator('#log').evaluate((el) => el.querySelector('.card.tool[data-kind="shell"]')?.scrollIntoView({ block: 'start' }));
  await page.screenshot({ path: `${OUT}/conversation-desktop.png` });
  await page.setViewportSize({ width: 360, height: 740 });
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth);
  check(overflow <= 360, `nothing wider than the phone's 360 px (${overflow})`);
  await page.screenshot({ path: `${OUT}/conversation-360x740.png` });
  await page.emulateMedia({ colorScheme: 'dark' });
  await page.screenshot({ path: `${OUT}/conversation-360x740-dark.png` });
  await page.goto(`${BASE}/#/`);
  await page.locator('.session').first().waitFor();
  // The search box: the list call's q, full text through the catalog.
  const ids = () => page.locator('#session-list .session').evaluateAll((els) => els.map((e) => e.dataset.id));
  const sessionId = decodeURIComponent(url.split('#/s/')[1]);
  check((await ids()).length === 4, 'the list shows the four sessions (the sub-agent\'s and the workflow\'s child too)');
  await page.locator('#q').fill('paged');
  await page.waitForFunction((id) => {
    const rows = [...document.querySelectorAll('#session-list .session')];
    return rows.length === 1 && rows[0].dataset.id === id;
  }, LONG);
  check(true, 'searching a word of one session\'s answer lists that session only');
  const hit = page.locator('#session-list .session .snippet').first();
  check(await hit.locator('mark').first().textContent() === 'paged', `the result shows the catalog's snippet with the match marked (${await hit.textContent()})`);
  // Markup in a matched text stays text in the snippet.
  await page.locator('#q').fill('pwned');
  await page.locator('#session-list .session .snippet mark', { hasText: 'pwned' }).first().waitFor();
  const markup = await page.locator('#session-list .session .snippet').first().textContent();
  check(markup.includes('<') && await page.locator('#session-list script, #session-list img').count() === 0
    && await page.evaluate(() => window.__pwned) === undefined, `markup in a snippet is shown as text (${markup})`);
  await page.locator('#q').fill('"also check the docs"');
  await page.waitForFunction((id) => {
    const rows = [...document.querySelectorAll('#session-list .session')];
    return rows.length === 1 && rows[0].dataset.id === id;
  }, sessionId);
  check(true, 'a quoted phrase of a steer finds its session');
  await page.locator('#q').fill('nowhereword');
  await page.locator('#session-list .empty', { hasText: 'No session matches.' }).waitFor();
  check(true, 'a search with no match says so');
  await page.locator('#q').fill('');
  await page.waitForFunction(() => document.querySelectorAll('#session-list .session').length === 4);
  await page.screenshot({ path: `${OUT}/sessions-360x740-dark.png` });
  result.screenshots.push('conversation-desktop.png', 'conversation-360x740.png', 'conversation-360x740-dark.png', 'sessions-360x740-dark.png');

  // ---- a watch-only sign-in ----
  const ro = await browser.newContext();
  watch(ro);
  const rp = await ro.newPage();
  rp.setDefaultTimeout(20000);
  await rp.goto(`${BASE}/login?token=${encodeURIComponent(RO_TOKEN)}`);
  await rp.waitForURL(`${BASE}/`);
  await rp.locator('#watch-only:not([hidden])').waitFor();
  check(await rp.locator('#new-session').count() === 0, 'watch only: no new-session form');
  await rp.goto(url);
  await rp.locator('.msg.assistant', { hasText: 'Steer received.' }).waitFor();
  check(await rp.locator('#composer').count() === 0, 'watch only: no composer');
  const roPost = await rp.evaluate(async (u) => (await fetch(`/v1/sessions/${u}/ops`, {
    method: 'POST', headers: { 'content-type': 'application/json', 'x-dsh-web': '1' },
    body: JSON.stringify({ type: 'interrupt' }),
  })).status, decodeURIComponent(url.split('#/s/')[1]));
  check(roPost === 403, 'watch only: an op is refused (403)');

  check(errors.length === 0, `no script error on the page (${errors.join('; ')})`);
  check(result.foreignRequests.length === 0, `no request to another host (${result.foreignRequests.join(', ')})`);
  result.assetTotal = Object.values(result.assetBytes).reduce((a, b) => a + b, 0);
  console.log(JSON.stringify({ result }));
} catch (e) {
  // What the page showed when a step failed (the tail of its transcript).
  for (const p of browser.contexts().flatMap((c) => c.pages())) {
    const text = await p.locator('#log').textContent({ timeout: 1000 }).catch(() => null);
    if (text) console.error(`page ${p.url()}: …${text.slice(-600)}`);
  }
  throw e;
} finally {
  await browser.close();
}
process.exit(0);
