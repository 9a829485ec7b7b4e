// dsh web: one more client of the dsh serve HTTP API (docs/http-api.md). Sessions list,
// conversation (event stream), composer, approvals, status. No framework, no build step.

import { h, markdown, fillCard, workflowView, age, money, count } from './render.js';

const ACCESS = document.querySelector('meta[name="dsh-access"]')?.content ?? 'read-only';
const READ_ONLY = ACCESS !== 'full';
const main = document.getElementById('main');
const crumb = document.getElementById('crumb');
const conn = document.getElementById('conn');

document.getElementById('watch-only').hidden = !READ_ONLY;
document.getElementById('logout').addEventListener('click', async () => {
  await fetch('/logout', { method: 'POST', headers: { 'x-dsh-web': '1' } });
  location.assign('/');
});

class ApiError extends Error {
  constructor(status, code, message) { super(message); this.status = status; this.code = code; }
}

/** One API call; the page's header marks it as coming from the page (CSRF). */
async function api(method, path, body) {
  const init = { method, headers: { 'x-dsh-web': '1' } };
  if (body !== undefined) {
    init.headers['content-type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const r = await fetch(path, init);
  const text = await r.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!r.ok) {
    if (r.status === 401) location.reload();
    throw new ApiError(r.status, data?.code ?? 'HTTP', data?.message ?? `HTTP ${r.status}`);
  }
  return data;
}

const op = (id, body) => api('POST', `/v1/sessions/${encodeURIComponent(id)}/ops`, body);

// ---- routing ----

let teardown = () => {};
// What was typed, not sent, in a conversation the page left for the fork it continues in.
let draft = '';

function route() {
  teardown();
  teardown = () => {};
  const m = location.hash.match(/^#\/s\/([^/?#]+)/);
  if (m) conversation(decodeURIComponent(m[1]));
  else sessions();
}
window.addEventListener('hashchange', route);

function badge(state) {
  return h('span', { class: `badge state-${state}`, dataset: { state } }, state.replaceAll('-', ' '));
}

function toast(message) {
  const t = h('div', { class: 'toast', role: 'alert' }, message);
  document.body.append(t);
  setTimeout(() => t.remove(), 6000);
}

// ---- sessions ----

function sessions() {
  crumb.textContent = 'Sessions';
  const list = h('ul', { class: 'session-list', id: 'session-list', 'aria-label': 'Sessions' });
  const q = h('input', {
    type: 'search', id: 'q', placeholder: 'Search sessions', 'aria-label': 'Search sessions',
    autocomplete: 'off',
  });
  const section = h('section', { class: 'sessions' }, h('div', { class: 'toolbar' }, q));
  if (!READ_ONLY) section.append(newSessionForm());
  section.append(list);
  main.replaceChildren(section);

  let pending = 0;
  const load = async () => {
    const mine = ++pending;
    const params = new URLSearchParams({ limit: '200' });
    if (q.value.trim()) params.set('q', q.value.trim());
    try {
      const items = await api('GET', `/v1/sessions?${params}`);
      if (mine !== pending) return;
      list.replaceChildren(...(items.length ? items.map(sessionRow)
        : [h('li', { class: 'muted empty' }, q.value.trim() ? 'No session matches.' : 'No sessions yet.')]));
    } catch (e) {
      if (mine === pending) list.replaceChildren(h('li', { class: 'error' }, e.message));
    }
  };
  let timer = 0;
  q.addEventListener('input', () => { clearTimeout(timer); timer = setTimeout(load, 200); });
  const every = setInterval(load, 5000);
  teardown = () => { clearInterval(every); clearTimeout(timer); };
  load();
}

function sessionRow(s) {
  const title = s.title || s.firstPrompt || s.id;
  return h('li', null, h('a', { class: 'session', href: `#/s/${encodeURIComponent(s.id)}`, dataset: { id: s.id } },
    h('span', { class: 'row1' }, badge(s.state), h('span', { class: 'title' }, title)),
    h('span', { class: 'row2 muted' },
      h('span', { class: 'cwd' }, s.cwd),
      h('span', null, age(s.updatedMs)),
      h('span', null, `${s.turns} turn${s.turns === 1 ? '' : 's'}`),
      h('span', { class: 'cost' }, money(s.usage?.costUsd))),
    s.matched ? snippet(s.matched) : null));
}

/** Where a session matched the search: the catalog's snippet as text, its hits marked. */
function snippet(m) {
  // `highlights` are UTF-8 byte ranges of the snippet.
  const bytes = new TextEncoder().encode(m.snippet || '');
  const text = (a, b) => new TextDecoder().decode(bytes.slice(a, b));
  const parts = [];
  let at = 0;
  for (const [a, b] of m.highlights || []) {
    if (a < at || b > bytes.length || b <= a) continue;
    parts.push(text(at, a), h('mark', null, text(a, b)));
    at = b;
  }
  parts.push(text(at, bytes.length));
  return h('span', { class: 'row3 snippet', dataset: { turn: m.turn } }, ...parts);
}

function select(name, label, options) {
  return h('label', null, label, h('select', { name },
    h('option', { value: '' }, 'default'), options.map((o) => h('option', { value: o }, o))));
}

function newSessionForm() {
  const form = h('form', { class: 'new-session', id: 'new-session' },
    h('label', { class: 'wide' }, 'Directory', h('input', {
      name: 'cwd', placeholder: 'absolute path (default: the server\'s directory)', autocomplete: 'off',
    })),
    h('label', null, 'Model', h('input', { name: 'model', placeholder: 'default', autocomplete: 'off' })),
    select('effort', 'Effort', ['off', 'low', 'high', 'max']),
    select('sandbox', 'Sandbox', ['read-only', 'workspace-write', 'danger-full-access']),
    select('approvalPolicy', 'Approvals', ['untrusted', 'on-request', 'on-failure', 'never']),
    h('label', { class: 'wide' }, 'First prompt', h('textarea', { name: 'prompt', rows: 2, placeholder: 'optional' })),
    h('button', { type: 'submit' }, 'Start session'));
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const body = {};
    for (const [k, v] of new FormData(form)) if (String(v).trim()) body[k] = String(v).trim();
    try {
      const s = await api('POST', '/v1/sessions', body);
      location.hash = `#/s/${encodeURIComponent(s.id)}`;
    } catch (err) { toast(err.message); }
  });
  return h('details', { class: 'new' }, h('summary', null, 'New session'), form);
}

// ---- conversation ----

const EVENT_TYPES = [
  'snapshot', 'sessionConfigured', 'state', 'turnStarted', 'turnEnded', 'userMessage',
  'textDelta', 'reasoningDelta', 'assistantMessage', 'usageUpdated', 'retrying', 'toolCallBegan',
  'toolCallProgress', 'toolCallEnded', 'approvalRequested', 'approvalResolved', 'questionAsked',
  'questionAnswered', 'compactionStarted', 'compactionEnded', 'subagentStarted',
  'subagentFinished', 'workflowProgress', 'jobUpdated', 'todoList', 'planMode', 'title', 'workingDirectory',
  'steerQueued', 'steerDelivered', 'steerWithdrawn', 'commandRan', 'notice', 'error',
  'sessionForked',
];

const OUTCOME = {
  'allowed-once': 'allowed once', 'allowed-always': 'allowed always', denied: 'denied',
  cancelled: 'cancelled', unavailable: 'unavailable',
};

function conversation(id) {
  crumb.textContent = '';
  const S = {
    id, state: 'idle', settings: {}, usage: null, ctx: null, cwd: '', title: '',
    cards: new Map(), children: new Map(), approvals: new Map(), questions: new Map(), paths: new Set(), steers: new Map(), live: null, commands: [],
    lastSeq: null, closed: false,
  };
  const title = h('h1', { id: 'title' }, id);
  const stateBox = h('span', { id: 'state' }, badge('idle'));
  const status = h('div', { class: 'status', id: 'status', 'aria-label': 'Status' });
  const log = h('div', { class: 'log', id: 'log', role: 'log', 'aria-label': 'Conversation', tabindex: '-1' });
  const steers = h('ul', { class: 'steers', id: 'steers', 'aria-label': 'Queued steers' });
  const text = h('textarea', {
    id: 'prompt', rows: 2, placeholder: 'Message (Enter sends, Shift+Enter new line, / commands)',
    'aria-label': 'Message', autocomplete: 'off',
  });
  text.value = draft;
  draft = '';
  const completions = h('ul', { class: 'completions', id: 'completions', role: 'listbox', hidden: true });
  const send = h('button', { type: 'submit', id: 'send' }, 'Send');
  const interrupt = h('button', { type: 'button', id: 'interrupt', class: 'danger', hidden: true }, 'Interrupt');
  const composer = h('form', { class: 'composer', id: 'composer' }, completions, text,
    h('div', { class: 'actions' }, interrupt, send));
  const section = h('section', { class: 'conv' },
    h('div', { class: 'conv-head' }, h('a', { href: '#/', class: 'back', 'aria-label': 'All sessions' }, '←'), title, stateBox),
    status, log, steers, READ_ONLY ? null : composer);
  main.replaceChildren(section);

  const nearBottom = () => window.innerHeight + window.scrollY >= document.body.scrollHeight - 80;
  // Where rows go: the log, or a detached batch while a page of the replay is drawn at once.
  let sink = log;
  const add = (el) => {
    if (sink !== log) { sink.append(el); return el; }
    const stick = nearBottom();
    if (S.live && S.live.el.isConnected) log.insertBefore(el, S.live.el);
    else log.append(el);
    if (stick) el.scrollIntoView({ block: 'end' });
    return el;
  };
  const row = (cls, ...children) => add(h('div', { class: `row ${cls}` }, ...children));

  function renderStatus() {
    const u = S.usage;
    const parts = [
      ['model', S.settings.model || 'default'],
      ['effort', S.settings.effort || 'default'],
    ];
    if (S.ctx != null) parts.push(['context', count(S.ctx)]);
    if (u) {
      parts.push(['tokens', `${count(u.inputTokens + (u.cacheReadTokens || 0))} in · ${count(u.outputTokens)} out`]);
      const total = u.inputTokens + (u.cacheReadTokens || 0);
      parts.push(['cache hit', total ? `${Math.round(((u.cacheReadTokens || 0) / total) * 100)}%` : '–']);
      parts.push(['cost', money(u.costUsd)]);
    }
    status.replaceChildren(...parts.map(([k, v]) => h('span', { class: 'stat', dataset: { stat: k } }, h('span', { class: 'k' }, k), ' ', h('span', { class: 'v' }, v))));
  }

  function setState(state) {
    S.state = state;
    stateBox.replaceChildren(badge(state));
    const busy = state === 'working' || state === 'waiting-for-approval';
    interrupt.hidden = !busy;
    send.textContent = busy ? 'Queue steer' : 'Send';
  }

  function setTitle(t) {
    S.title = t;
    title.textContent = t || S.id;
    document.title = `${t || S.id} · dsh`;
  }

  function renderSteers() {
    steers.replaceChildren(...[...S.steers.values()].map((s) => h('li', { class: 'steer', dataset: { steer: s.steerId } },
      h('span', { class: 'label' }, 'queued'), h('span', { class: 'text' }, s.text),
      READ_ONLY ? null : h('button', { type: 'button', class: 'link', onclick: () => withdraw(s, true) }, 'Edit'),
      READ_ONLY ? null : h('button', { type: 'button', class: 'link', onclick: () => withdraw(s, false) }, 'Remove'))));
  }

  async function withdraw(s, edit) {
    try {
      await op(S.id, { type: 'withdrawSteer', steerId: s.steerId });
      if (edit) { text.value = s.text; text.focus(); }
    } catch (e) { toast(e.code === 'CONFLICT' ? 'That steer was already delivered.' : e.message); }
  }

  // The answer being streamed: text and reasoning so far.
  function ensureLive() {
    if (!S.live) {
      const reasoning = h('details', { class: 'reasoning', hidden: true }, h('summary', null, 'Reasoning'), h('div', { class: 'rtext' }));
      const body = h('div', { class: 'md' });
      const el = h('div', { class: 'msg assistant live', id: 'live' }, reasoning, body);
      S.live = { el, reasoning, body, text: '', thinking: '' };
      log.append(el);
    }
    return S.live;
  }
  function paintLive() {
    const l = S.live;
    if (!l) return;
    const stick = nearBottom();
    l.body.textContent = l.text;
    l.reasoning.hidden = !l.thinking;
    l.reasoning.querySelector('.rtext').textContent = l.thinking;
    if (stick) l.el.scrollIntoView({ block: 'end' });
  }
  function dropLive() {
    if (S.live) { S.live.el.remove(); S.live = null; }
  }

  function approvalCard(a) {
    if (S.approvals.has(a.requestId)) return;
    const d = a.display || {};
    // A plan submitted for review (the request's typed purpose): the plan, accept or keep
    // planning. The policy's approval of the same call (a tool call) shows the plan too.
    const plan = a.purpose === 'plan-review';
    const buttons = READ_ONLY ? null : h('div', { class: 'choices' },
      h('button', { type: 'button', dataset: { decision: 'allowOnce' } }, plan ? 'Accept plan' : 'Allow once'),
      plan ? null : h('button', { type: 'button', dataset: { decision: 'allowAlways' } }, 'Allow always'),
      h('button', { type: 'button', class: 'danger', dataset: { decision: 'deny' } }, plan ? 'Keep planning' : 'Deny'));
    const card = h('div', { class: `card approval${plan ? ' plan-review' : ''}`, dataset: { request: a.requestId } },
      h('div', { class: 'card-head' }, h('span', { class: 'icon', 'aria-hidden': 'true' }, plan ? '☰' : '?'),
        h('span', { class: 'title' }, plan ? 'Review the plan' : `Allow ${d.title || 'this tool'}?`),
        d.subject && !plan ? h('code', { class: 'subject' }, d.subject) : null),
      d.kind === 'plan' && d.plan ? h('div', { class: 'plan md' }, markdown(d.plan)) : null,
      a.reason && !plan ? h('div', { class: 'reason' }, a.reason) : null,
      buttons);
    buttons?.addEventListener('click', async (e) => {
      const b = e.target.closest('button');
      if (!b) return;
      buttons.querySelectorAll('button').forEach((x) => { x.disabled = true; });
      const decision = { type: b.dataset.decision };
      try {
        await op(S.id, { type: 'answerApproval', requestId: a.requestId, decision });
      } catch (err) {
        if (err.code !== 'UNKNOWN_REQUEST') {
          toast(err.message);
          buttons.querySelectorAll('button').forEach((x) => { x.disabled = false; });
        }
      }
    });
    S.approvals.set(a.requestId, card);
    const drawing = sink !== log;
    add(card);
    if (!drawing) buttons?.querySelector('button')?.focus({ preventScroll: true });
  }

  // A question the agent asks (ask_user_question): options (one or several) and free text.
  function questionCard(q) {
    if (S.questions.has(q.requestId)) return;
    const form = h('form', { class: 'questions' });
    (q.questions || []).forEach((x, n) => {
      const name = `q-${q.requestId}-${n}`;
      const fs = h('fieldset', { class: 'question', dataset: { question: x.id } },
        h('legend', null, x.header ? h('strong', null, `${x.header}: `) : null, x.question));
      for (const o of x.options || []) {
        fs.append(h('label', { class: 'option' },
          h('input', { type: x.multiSelect ? 'checkbox' : 'radio', name, value: o.label, disabled: READ_ONLY }),
          ' ', o.label, o.description ? h('span', { class: 'muted' }, ` · ${o.description}`) : null));
      }
      fs.append(h('input', {
        type: 'text', class: 'other', name: `${name}-text`, disabled: READ_ONLY,
        placeholder: (x.options || []).length ? 'Or type an answer' : 'Your answer', 'aria-label': `Answer: ${x.question}`,
      }));
      form.append(fs);
    });
    if (!READ_ONLY) form.append(h('div', { class: 'choices' }, h('button', { type: 'submit' }, 'Answer')));
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      const answers = (q.questions || []).map((x, n) => {
        const name = `q-${q.requestId}-${n}`;
        const selected = [...form.querySelectorAll(`input[name="${name}"]:checked`)].map((i) => i.value);
        const text = form.querySelector(`input[name="${name}-text"]`).value.trim();
        return { questionId: x.id, selected, ...(text ? { text } : {}) };
      });
      const button = form.querySelector('button');
      button.disabled = true;
      try {
        await op(S.id, { type: 'answerQuestion', requestId: q.requestId, answers });
      } catch (err) {
        if (err.code !== 'UNKNOWN_REQUEST') { toast(err.message); button.disabled = false; }
      }
    });
    const c = h('div', { class: 'card question-card', dataset: { request: q.requestId } },
      h('div', { class: 'card-head' }, h('span', { class: 'icon', 'aria-hidden': 'true' }, '?'),
        h('span', { class: 'title' }, 'The agent asks')),
      form);
    S.questions.set(q.requestId, c);
    const drawing = sink !== log;
    add(c);
    if (!drawing) form.querySelector('input')?.focus({ preventScroll: true });
  }

  // Paths the tool cards named (offered by `@` completion).
  function notePaths(d) {
    if (!d) return;
    if (d.diff?.path) S.paths.add(d.diff.path);
    if (['read', 'edit', 'write'].includes(d.kind) && d.subject && !/\s/.test(d.subject)) S.paths.add(d.subject);
  }

  // Sub-agent cards: an agent tool card whose child session is known (its `child` field once
  // ended, or the live subagentStarted naming its call) opens the child's transcript inline
  // (its committed events, a finite page of the events route) and links to the child's page.
  function agentCard(c, d, callId) {
    if (d?.kind !== 'agent') return;
    const child = d.fields?.find((f) => f.label === 'child')?.value || S.children.get(callId);
    if (!child || c.querySelector('.child')) return;
    const box = h('div', { class: 'child-log', role: 'log', 'aria-label': 'Sub-agent transcript', hidden: true });
    const toggle = h('button', { type: 'button', class: 'link child-toggle', 'aria-expanded': 'false' }, 'Show transcript');
    toggle.addEventListener('click', async () => {
      const show = box.hidden;
      box.hidden = !show;
      toggle.setAttribute('aria-expanded', String(show));
      toggle.textContent = show ? 'Hide transcript' : 'Show transcript';
      if (!show || box.childElementCount) return;
      try {
        const r = await fetch(`/v1/sessions/${encodeURIComponent(child)}/events?before=${Number.MAX_SAFE_INTEGER}`,
          { headers: { 'x-dsh-web': '1' } });
        if (!r.ok) throw new Error(`The sub-agent's transcript: HTTP ${r.status}`);
        box.replaceChildren(...childTranscript(parseSse(await r.text())));
      } catch (e) { box.replaceChildren(h('div', { class: 'error' }, e.message)); }
    });
    c.append(h('div', { class: 'child', dataset: { child } }, toggle, ' ',
      h('a', { href: `#/s/${encodeURIComponent(child)}` }, 'Open its session'), box));
  }

  function card(callId) {
    let c = S.cards.get(callId);
    if (!c) {
      c = h('div', { class: 'card tool', dataset: { call: callId } });
      S.cards.set(callId, c);
      add(c);
    }
    return c;
  }

  const handlers = {
    snapshot(ev) {
      const s = ev.session;
      if (s) {
        setTitle(s.title || s.firstPrompt || '');
        S.cwd = s.cwd;
        S.settings = s.settings || {};
        setState(s.state);
      }
      if (ev.usage) S.usage = ev.usage;
      for (const a of ev.pendingApprovals || []) approvalCard(a);
      for (const q of ev.pendingQuestions || []) questionCard(q);
      S.steers = new Map((ev.queuedSteers || []).map((q) => [q.steerId, q]));
      renderSteers();
      if (ev.live) {
        const l = ensureLive();
        l.text = ev.live.text || '';
        l.thinking = ev.live.reasoning || '';
        paintLive();
      } else dropLive();
      renderStatus();
      if (s?.state === 'ended') close();
    },
    sessionConfigured(ev) { S.settings = ev.settings || {}; S.cwd = ev.cwd; renderStatus(); },
    state(ev) { setState(ev.state); },
    turnEnded(ev) {
      dropLive();
      const r = ev.reason || {};
      if (r.type && r.type !== 'completed') {
        row('turn-end', `Turn ${ev.turn} ended: ${r.type}${r.error?.message ? ` (${r.error.message})` : ''}`);
      }
    },
    userMessage(ev) {
      add(h('div', { class: `msg user source-${ev.source || 'user'}` },
        ev.source && ev.source !== 'user' ? h('span', { class: 'source' }, ev.source) : null,
        h('div', { class: 'text' }, ev.text)));
    },
    textDelta(ev) { ensureLive().text += ev.text; paintLive(); },
    reasoningDelta(ev) { ensureLive().thinking += ev.text; paintLive(); },
    assistantMessage(ev) {
      dropLive();
      if (!ev.text && !ev.reasoning) return;
      add(h('div', { class: `msg assistant${ev.interrupted ? ' interrupted' : ''}` },
        ev.reasoning ? h('details', { class: 'reasoning' }, h('summary', null, 'Reasoning'), h('div', { class: 'rtext' }, ev.reasoning)) : null,
        h('div', { class: 'md' }, markdown(ev.text || '')),
        ev.interrupted ? h('div', { class: 'mark' }, 'interrupted') : null));
    },
    usageUpdated(ev) { S.usage = ev.total; S.ctx = ev.contextTokens; renderStatus(); },
    retrying(ev) {
      if (S.live) { S.live.text = ''; S.live.thinking = ''; paintLive(); }
      row('retry', `Retrying (attempt ${ev.attempt}${ev.maxAttempts ? ` of ${ev.maxAttempts}` : ''}): ${ev.error?.message || ''}`);
    },
    toolCallBegan(ev) { notePaths(ev.display); const c = card(ev.callId); fillCard(c, ev.display, null); agentCard(c, ev.display, ev.callId); },
    toolCallProgress(ev) {
      const c = card(ev.callId);
      c._progress = (c._progress || '') + (ev.output || '');
      if (!c.classList.contains('ended')) {
        const pre = c.querySelector('pre.output.live') || c.appendChild(h('pre', { class: 'output live' }));
        pre.textContent = c._progress;
      }
    },
    toolCallEnded(ev) {
      const c = card(ev.callId);
      fillCard(c, ev.display, { isError: ev.isError, errorCode: ev.errorCode });
      agentCard(c, ev.display, ev.callId);
    },
    workflowProgress(ev) {
      // The whole run each time: the call's card shows its agents (kept when it is redrawn).
      const c = card(ev.callId);
      c._workflow = ev;
      const view = workflowView(ev);
      const old = c.querySelector('.workflow');
      if (old) old.replaceWith(view);
      else {
        const at = c.querySelector('.headline, pre.output, .meta');
        if (at) at.before(view); else c.append(view);
      }
    },
    approvalRequested(ev) { approvalCard(ev); },
    approvalResolved(ev) {
      const c = S.approvals.get(ev.requestId);
      if (!c) return;
      c.classList.add('resolved', `outcome-${ev.outcome}`);
      c.querySelector('.choices')?.remove();
      if (!c.querySelector('.outcome')) {
        c.append(h('div', { class: 'outcome', dataset: { outcome: ev.outcome } }, OUTCOME[ev.outcome] || ev.outcome, ev.reason ? `: ${ev.reason}` : ''));
      }
    },
    questionAsked(ev) { questionCard(ev); },
    questionAnswered(ev) {
      const c = S.questions.get(ev.requestId);
      if (!c || c.classList.contains('resolved')) return;
      c.classList.add('resolved');
      c.querySelectorAll('input, button').forEach((x) => { x.disabled = true; });
      c.querySelector('.choices')?.remove();
      const said = (ev.answers || []).map((a) => [...(a.selected || []), a.text].filter(Boolean).join(', ')).join(' / ');
      c.append(h('div', { class: 'outcome', dataset: { outcome: ev.answers?.length ? 'answered' : 'dismissed' } },
        ev.answers?.length ? `answered: ${said}` : 'dismissed'));
    },
    compactionStarted() { row('compaction', 'Compacting the conversation…'); },
    compactionEnded(ev) {
      row('compaction', ev.error ? `Compaction failed: ${ev.error}`
        : `Compacted${ev.tokensBefore ? `: ${count(ev.tokensBefore)} → ${count(ev.tokensAfter)} tokens` : ''}`);
    },
    subagentStarted(ev) {
      if (ev.callId) {
        S.children.set(ev.callId, ev.sessionId);
        const c = S.cards.get(ev.callId);
        if (c) agentCard(c, { kind: c.dataset.kind }, ev.callId);
      }
      row('agent', 'Sub-agent ', h('a', { href: `#/s/${encodeURIComponent(ev.sessionId)}` }, ev.label || ev.sessionId), ' started');
    },
    subagentFinished(ev) {
      row('agent', 'Sub-agent ', h('a', { href: `#/s/${encodeURIComponent(ev.sessionId)}` }, ev.sessionId), ` ${ev.status}`);
    },
    jobUpdated(ev) { row('job', `Job ${ev.jobId} ${ev.state}${ev.description ? `: ${ev.description}` : ''}`); },
    todoList(ev) {
      fillCard(add(h('div', { class: 'card tool' })), { kind: 'todo', title: 'Tasks', todos: ev.items || [] }, { isError: false });
    },
    planMode(ev) {
      const r = row('plan', ev.active ? 'Plan mode on' : 'Plan mode off');
      if (ev.plan) r.append(h('div', { class: 'md plan' }, markdown(ev.plan)));
    },
    title(ev) { setTitle(ev.title); },
    // The session continues in a fork (a conversation rewind here or in another client): a
    // replayed history links it; live, the page follows it, the unsent draft kept.
    sessionForked(ev) {
      const to = `#/s/${encodeURIComponent(ev.sessionId)}`;
      const why = ev.toTurn ? ` (rewound to before turn ${ev.toTurn}${ev.rewindId ? ', files restored' : ''})` : '';
      row('forked', 'Continued in ', h('a', { href: to, class: 'fork' }, ev.sessionId), why);
      if (sink === log && !replaying) {
        draft = text.value;
        // Opened in the server first, so the fork's page is live (a watch-only page watches).
        const opened = READ_ONLY ? Promise.resolve()
          : api('POST', '/v1/sessions', { type: 'resume', sessionId: ev.sessionId }).catch((e) => toast(e.message));
        opened.then(() => { location.hash = to; });
      }
    },
    workingDirectory(ev) { S.cwd = ev.cwd; row('cwd', 'Working directory: ', h('code', null, ev.cwd)); },
    steerQueued(ev) { S.steers.set(ev.steerId, ev); renderSteers(); },
    steerDelivered(ev) { S.steers.delete(ev.steerId); renderSteers(); },
    steerWithdrawn(ev) { S.steers.delete(ev.steerId); renderSteers(); },
    commandRan(ev) {
      const o = ev.outcome || {};
      const r = row('command', h('code', null, `/${ev.name}`));
      if (o.type === 'done' && o.text) r.append(h('pre', { class: 'output' }, o.text));
      else if (o.type === 'submitted') r.append(' → ', o.prompt || '');
    },
    notice(ev) { row(`notice ${ev.level || ''}`, ev.text); },
    error(ev) { row('error', `${ev.code}: ${ev.message}`); },
  };

  // Paging: the stream starts with the last PAGE_TURNS turns (`?tailTurns=`); its events are
  // held until the snapshot and drawn at once. Earlier turns are fetched a page at a time
  // (`?before=FIRST_SEQ&tailTurns=`, a finite stream) behind a "Show earlier" button, each drawn
  // above. The events that only set state (settings, usage, title: the last of each) are
  // applied once for the tail.
  let replaying = true;
  let held = [];
  // The first drawn event's seq and turn (what is before them is fetched on demand).
  let firstSeq = null;
  let firstTurn = 1;
  const earlier = h('button', { type: 'button', id: 'earlier', class: 'earlier', hidden: true });
  log.append(earlier);
  function draw(events) {
    const batch = document.createElement('div');
    sink = batch;
    try {
      for (const x of events) {
        const ev = !META.has(x.type) && handlers[x.type] ? parse(x.data) : null;
        if (ev) handlers[ev.type]?.(ev);
      }
    } finally { sink = log; }
    return batch;
  }
  /** Notes where `events` (the next history drawn above) start. */
  function noteStart(events) {
    if (!events.length) { firstTurn = 1; return; }
    const seq = parse(events[0].data)?.seq;
    if (typeof seq === 'number') firstSeq = seq;
    const start = events.find((x) => x.type === 'turnStarted');
    firstTurn = start ? (parse(start.data)?.turn ?? 1) : 1;
  }
  function renderEarlier() {
    earlier.hidden = !(firstTurn > 1 && firstSeq != null);
    earlier.textContent = `Show earlier turns (${firstTurn - 1} more)`;
  }
  earlier.addEventListener('click', async () => {
    earlier.disabled = true;
    try {
      const r = await fetch(`/v1/sessions/${encodeURIComponent(id)}/events?before=${firstSeq}&tailTurns=${PAGE_TURNS}`,
        { headers: { 'x-dsh-web': '1' } });
      if (!r.ok) throw new Error(`Earlier turns: HTTP ${r.status}`);
      const page = parseSse(await r.text());
      noteStart(page);
      const before = document.documentElement.scrollHeight;
      earlier.after(...draw(page).childNodes);
      window.scrollBy(0, document.documentElement.scrollHeight - before);
      renderEarlier();
      if (earlier.hidden) log.focus({ preventScroll: true });
    } catch (e) { toast(e.message); }
    earlier.disabled = false;
  });
  function endReplay() {
    replaying = false;
    const events = held;
    held = [];
    noteStart(events);
    // Each of these carries the whole state of its kind: the last one of each type is enough
    // (a turn has several usage updates).
    const last = new Map();
    for (const x of events) if (META.has(x.type)) last.set(x.type, x);
    for (const x of last.values()) { const ev = parse(x.data); if (ev) handlers[ev.type]?.(ev); }
    for (let i = events.length - 1; i >= 0 && S.lastSeq === null; i--) {
      const seq = parse(events[i].data)?.seq;
      if (typeof seq === 'number') S.lastSeq = seq;
    }
    log.append(...draw(events).childNodes);
    renderEarlier();
  }

  // The event stream: EventSource resumes by itself with Last-Event-ID (every committed event
  // once, then a fresh snapshot); a lagged stream is reopened after the last committed seq.
  let source = null;
  function open(after) {
    // The first connection asks for the tail; the browser's own reconnects repeat this URL with
    // Last-Event-ID, which the server lets win.
    const url = `/v1/sessions/${encodeURIComponent(id)}/events?${after != null ? `after=${after}` : `tailTurns=${PAGE_TURNS}`}`;
    source = new EventSource(url);
    source.onopen = () => { conn.textContent = 'live'; conn.dataset.state = 'live'; };
    source.onerror = (e) => {
      if (e instanceof MessageEvent && e.data) return; // an `error` event of the protocol
      if (S.closed) return;
      conn.textContent = 'reconnecting…';
      conn.dataset.state = 'down';
    };
    for (const type of EVENT_TYPES) {
      source.addEventListener(type, (e) => {
        if (!(e instanceof MessageEvent) || !e.data) return;
        if (replaying && type !== 'snapshot') {
          // Held as received: parsed only when drawn (most of a long replay never is).
          if (!held.length) performance.mark('dsh-first-event');
          held.push({ type, data: e.data });
          return;
        }
        const ev = parse(e.data);
        if (!ev) return;
        if (typeof ev.seq === 'number' && !LIVE.has(ev.type)) S.lastSeq = ev.seq;
        if (replaying) {
          performance.mark('dsh-replayed');
          endReplay();
          handlers.snapshot(ev);
          window.scrollTo(0, document.documentElement.scrollHeight);
          performance.mark('dsh-transcript');
          return;
        }
        handlers[ev.type]?.(ev);
        if (ev.type === 'error' && ev.code === 'SUBSCRIBER_LAGGED') {
          source.close();
          open(S.lastSeq);
        }
      });
    }
  }
  function close() {
    S.closed = true;
    source?.close();
    conn.textContent = 'ended';
    conn.dataset.state = 'ended';
  }
  open(null);

  // The composer.
  api('GET', `/v1/sessions/${encodeURIComponent(id)}/commands`).then((c) => { S.commands = c || []; }).catch(() => {});
  // Completion: `/name` at the start (the session's command registry) or `@path` anywhere: the
  // paths this session's tool cards named, then the server's listing of the session's
  // directory (`GET …/files?q=`, fetched as the mention is typed).
  let sel = 0;
  let files = { q: null, items: [] };
  let filesWanted = null;
  let filesTimer = 0;
  function fetchFiles(q) {
    filesWanted = q;
    clearTimeout(filesTimer);
    filesTimer = setTimeout(async () => {
      let items = [];
      try {
        const r = await api('GET', `/v1/sessions/${encodeURIComponent(id)}/files?${new URLSearchParams({ q, limit: '20' })}`);
        items = r?.files || [];
      } catch { items = []; }
      if (filesWanted !== q) return;
      files = { q, items };
      showCompletions();
    }, 100);
  }
  function context() {
    let m = text.value.match(/^\/(\S*)$/);
    if (m) return { kind: 'command', items: S.commands.filter((c) => c.name.startsWith(m[1])).slice(0, 8) };
    const before = text.value.slice(0, text.selectionStart ?? text.value.length);
    m = before.match(/(?:^|\s)@(\S*)$/);
    if (m) {
      const q = m[1].toLowerCase();
      if (files.q !== m[1] && filesWanted !== m[1]) fetchFiles(m[1]);
      const listed = files.q === m[1] ? files.items : [];
      const known = [...S.paths].filter((p) => p.toLowerCase().includes(q));
      const items = [...new Set([...known, ...listed])].filter((p) => p !== m[1]).slice(0, 8);
      return { kind: 'file', start: before.length - m[1].length - 1, end: before.length, items };
    }
    return { kind: null, items: [] };
  }
  function showCompletions() {
    const ctx = context();
    sel = Math.min(sel, Math.max(ctx.items.length - 1, 0));
    completions.hidden = !ctx.items.length;
    completions.replaceChildren(...ctx.items.map((c, i) => h('li', { role: 'option', 'aria-selected': i === sel ? 'true' : 'false', dataset: { index: i, ...(ctx.kind === 'file' ? { path: c } : { name: c.name }) } },
      ctx.kind === 'file' ? h('code', null, `@${c}`)
        : [h('code', null, `/${c.name}`), c.argumentHint ? ` ${c.argumentHint}` : '', ' ', h('span', { class: 'muted' }, c.description || '')])));
  }
  function complete(i) {
    const ctx = context();
    const item = ctx.items[i];
    if (!item) return false;
    if (ctx.kind === 'command') text.value = `/${item.name} `;
    else {
      const put = `@${item} `;
      text.value = text.value.slice(0, ctx.start) + put + text.value.slice(ctx.end);
      text.setSelectionRange(ctx.start + put.length, ctx.start + put.length);
    }
    sel = 0;
    showCompletions();
    return true;
  }
  completions.addEventListener('mousedown', (e) => {
    const li = e.target.closest('li');
    if (!li) return;
    e.preventDefault();
    complete(Number(li.dataset.index));
    text.focus();
  });
  text.addEventListener('input', () => { sel = 0; showCompletions(); });
  text.addEventListener('keydown', (e) => {
    if (e.key === 'Tab' && !completions.hidden) {
      if (complete(sel)) e.preventDefault();
    } else if ((e.key === 'ArrowDown' || e.key === 'ArrowUp') && !completions.hidden) {
      e.preventDefault();
      const n = completions.children.length;
      sel = (sel + (e.key === 'ArrowDown' ? 1 : n - 1)) % n;
      showCompletions();
    } else if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      // `/pa` is not a command to send as a prompt: Enter takes the chosen completion first.
      const ctx = completions.hidden ? null : context();
      if (ctx?.kind === 'command' && !S.commands.some((c) => `/${c.name}` === text.value.trim())) complete(sel);
      else composer.requestSubmit();
    } else if (e.key === 'Escape' && !interrupt.hidden) {
      e.preventDefault();
      interrupt.click();
    }
  });
  composer.addEventListener('submit', async (e) => {
    e.preventDefault();
    const value = text.value.trim();
    if (!value) return;
    const busy = S.state === 'working' || S.state === 'waiting-for-approval';
    const cmd = value.match(/^\/(\S+)\s*([\s\S]*)$/);
    let body;
    if (cmd && S.commands.some((c) => c.name === cmd[1] && c.source !== 'custom' && c.source !== 'skill')) {
      body = { type: 'runCommand', name: cmd[1], ...(cmd[2] ? { args: cmd[2] } : {}) };
    } else if (busy) body = { type: 'steer', text: value };
    else body = { type: 'submit', text: value };
    send.disabled = true;
    try {
      await op(id, body);
      text.value = '';
      showCompletions();
    } catch (err) { toast(err.message); }
    send.disabled = false;
    text.focus();
  });
  interrupt.addEventListener('click', async () => {
    try { await op(id, { type: 'interrupt' }); } catch (err) { toast(err.message); }
  });

  renderStatus();
  teardown = () => { S.closed = true; source?.close(); conn.textContent = ''; };
}

// Events that only set the conversation's state (no row): applied for every replayed event.
const META = new Set(['sessionConfigured', 'usageUpdated', 'title', 'state']);
const PAGE_TURNS = 50;

function parse(data) {
  try { return JSON.parse(data); } catch { return null; }
}

/** A sub-agent's transcript (its prompt, answers and tool cards), drawn inside its card. */
function childTranscript(events) {
  const out = [];
  const cards = new Map();
  for (const x of events) {
    const ev = parse(x.data);
    if (!ev) continue;
    if (ev.type === 'userMessage') out.push(h('div', { class: 'msg user' }, h('div', { class: 'text' }, ev.text)));
    else if (ev.type === 'assistantMessage' && ev.text) {
      out.push(h('div', { class: 'msg assistant' }, h('div', { class: 'md' }, markdown(ev.text))));
    } else if (ev.type === 'toolCallBegan' || ev.type === 'toolCallEnded') {
      let c = cards.get(ev.callId);
      if (!c) { c = h('div', { class: 'card tool' }); cards.set(ev.callId, c); out.push(c); }
      fillCard(c, ev.display, ev.type === 'toolCallEnded' ? { isError: ev.isError, errorCode: ev.errorCode } : null);
    }
  }
  if (!out.length) out.push(h('div', { class: 'muted' }, 'Nothing yet.'));
  return out;
}

/** The events of a finite Server-Sent Events body (a page of earlier turns), held unparsed. */
function parseSse(text) {
  const out = [];
  for (const block of text.split(/\r?\n\r?\n/)) {
    let type = null;
    const data = [];
    for (const line of block.split(/\r?\n/)) {
      if (line.startsWith('event:')) type = line.slice(6).trim();
      else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
    }
    if (type && data.length) out.push({ type, data: data.join('\n') });
  }
  return out;
}

const LIVE = new Set([
  'textDelta', 'reasoningDelta', 'toolCallProgress', 'state', 'sessionConfigured', 'steerQueued',
  'steerDelivered', 'steerWithdrawn', 'subagentStarted', 'commandRan', 'notice', 'error', 'snapshot',
]);

route();
