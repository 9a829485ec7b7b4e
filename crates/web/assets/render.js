// Safe rendering: every piece of model or tool output becomes DOM text (textContent), never
// markup. No innerHTML anywhere in the app.

/** An element with attributes and children (strings become text nodes). */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') el.className = v;
      else if (k === 'dataset') Object.assign(el.dataset, v);
      else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v === true ? '' : String(v));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// ---- markdown (a safe subset: headings, lists, tables, fenced code, quotes, inline) ----

const SAFE_URL = /^(https?:\/\/|mailto:)/i;

/** Inline markdown of one line: `code`, **bold**, *em*, [text](http…). */
export function inline(text) {
  const out = [];
  const re = /(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)|\*\*([^*]+)\*\*|(?<![\w*])\*([^*\s][^*]*?)\*(?![\w*])|\[([^\]]+)\]\(([^)\s]+)\)/g;
  let last = 0;
  for (const m of text.matchAll(re)) {
    if (m.index > last) out.push(text.slice(last, m.index));
    if (m[1]) out.push(h('code', null, m[2]));
    else if (m[3] !== undefined) out.push(h('strong', null, m[3]));
    else if (m[4] !== undefined) out.push(h('em', null, m[4]));
    else if (m[5] !== undefined) {
      out.push(SAFE_URL.test(m[6])
        ? h('a', { href: m[6], target: '_blank', rel: 'noopener noreferrer' }, m[5])
        : `[${m[5]}](${m[6]})`);
    }
    last = m.index + m[0].length;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}

function tableRow(line) {
  let s = line.trim();
  if (s.startsWith('|')) s = s.slice(1);
  if (s.endsWith('|')) s = s.slice(0, -1);
  return s.split('|').map((c) => c.trim());
}

/** Markdown text as a fragment of safe elements. */
export function markdown(text) {
  const root = document.createDocumentFragment();
  const lines = String(text).replace(/\r\n?/g, '\n').split('\n');
  let i = 0;
  let para = [];
  const flush = () => {
    if (para.length) {
      const p = h('p');
      para.forEach((l, k) => { if (k) p.append(h('br')); append(p, inline(l)); });
      root.append(p);
      para = [];
    }
  };
  while (i < lines.length) {
    const line = lines[i];
    const fence = line.match(/^\s*(```+|~~~+)\s*([\w+#.-]*)/);
    if (fence) {
      flush();
      const body = [];
      i++;
      while (i < lines.length && !lines[i].trim().startsWith(fence[1])) body.push(lines[i++]);
      i++;
      const code = h('code', fence[2] ? { class: `lang-${fence[2]}` } : null, highlight(body.join('\n'), fence[2]));
      root.append(h('pre', { class: 'code', dataset: fence[2] ? { lang: fence[2] } : {} }, code));
      continue;
    }
    const head = line.match(/^(#{1,6})\s+(.*)$/);
    if (head) {
      flush();
      root.append(h(`h${Math.min(head[1].length + 2, 6)}`, null, inline(head[2])));
      i++;
      continue;
    }
    if (/^\s*\|.*\|\s*$/.test(line) && i + 1 < lines.length && /^\s*\|?\s*:?-{3,}/.test(lines[i + 1])) {
      flush();
      const table = h('table');
      table.append(h('thead', null, h('tr', null, tableRow(line).map((c) => h('th', null, inline(c))))));
      const tbody = h('tbody');
      i += 2;
      while (i < lines.length && /^\s*\|/.test(lines[i])) {
        tbody.append(h('tr', null, tableRow(lines[i]).map((c) => h('td', null, inline(c)))));
        i++;
      }
      table.append(tbody);
      root.append(h('div', { class: 'table' }, table));
      continue;
    }
    const item = line.match(/^(\s*)([-*+]|\d+[.)])\s+(.*)$/);
    if (item) {
      flush();
      const ordered = /\d/.test(item[2]);
      const list = h(ordered ? 'ol' : 'ul');
      while (i < lines.length) {
        const m = lines[i].match(/^(\s*)([-*+]|\d+[.)])\s+(.*)$/);
        if (!m || /\d/.test(m[2]) !== ordered) break;
        const task = m[3].match(/^\[([ xX])\]\s+(.*)$/);
        list.append(h('li', task ? { class: task[1] === ' ' ? 'task' : 'task done' } : null,
          inline(task ? task[2] : m[3])));
        i++;
      }
      root.append(list);
      continue;
    }
    if (/^>\s?/.test(line)) {
      flush();
      const quote = [];
      while (i < lines.length && /^>\s?/.test(lines[i])) quote.push(lines[i++].replace(/^>\s?/, ''));
      root.append(h('blockquote', null, markdown(quote.join('\n'))));
      continue;
    }
    if (/^\s*$/.test(line)) { flush(); i++; continue; }
    para.push(line);
    i++;
  }
  flush();
  return root;
}

// ---- code highlighting (a small tokenizer: comments, strings, numbers, keywords, types) ----

const WORDS = {
  rust: 'as async await break const continue crate dyn else enum extern false fn for if impl in let loop match mod move mut pub ref return self Self static struct super trait true type unsafe use where while',
  js: 'async await break case catch class const continue debugger default delete do else export extends false finally for from function if import in instanceof interface let new null of return static super switch this throw true try type typeof undefined var void while yield',
  python: 'and as assert async await break class continue def del elif else except False finally for from global if import in is lambda None nonlocal not or pass raise return self True try while with yield',
  sh: 'case do done elif else esac exit export fi for function if in local return then until while',
  go: 'break case chan const continue default defer else fallthrough false for func go goto if import interface map nil package range return select struct switch true type var',
  c: 'auto bool break case catch char class const continue default delete do double else enum extends extern false final finally float for goto if implements import int interface long namespace new nullptr package private protected public register return short signed sizeof static struct super switch template this throw throws true try typedef typename union unsigned using var void volatile while',
  json: 'true false null',
};
const ALIAS = {
  rs: 'rust', javascript: 'js', jsx: 'js', ts: 'js', tsx: 'js', typescript: 'js', mjs: 'js',
  py: 'python', bash: 'sh', shell: 'sh', zsh: 'sh', console: 'sh', golang: 'go', cpp: 'c',
  'c++': 'c', h: 'c', hpp: 'c', java: 'c', kotlin: 'c', cs: 'c', csharp: 'c', toml: 'sh',
  yaml: 'sh', yml: 'sh',
};
const LEXERS = new Map();

function lexer(lang) {
  const name = ALIAS[lang] || lang;
  if (!WORDS[name]) return null;
  if (!LEXERS.has(name)) {
    const hash = name === 'python' || name === 'sh';
    const comment = hash ? '#[^\\n]*' : '\\/\\/[^\\n]*|\\/\\*[\\s\\S]*?\\*\\/';
    const str = `"(?:\\\\[\\s\\S]|[^"\\\\])*"|${name === 'rust' ? "'(?:\\\\.|[^'\\\\\\n])'" : "'(?:\\\\[\\s\\S]|[^'\\\\])*'"}${name === 'js' || name === 'go' ? '|`[^`]*`' : ''}`;
    const re = new RegExp(`(${comment})|(${str})|(\\b(?:0x[\\da-fA-F_]+|\\d[\\d_]*(?:\\.\\d+)?(?:[eE][+-]?\\d+)?)\\b)|([A-Za-z_$][\\w$]*)`, 'g');
    LEXERS.set(name, { re, words: new Set(WORDS[name].split(' ')), types: name !== 'sh' && name !== 'json' });
  }
  return LEXERS.get(name);
}

/** Code as text nodes and token spans (`tok-com`, `tok-str`, `tok-num`, `tok-kw`, `tok-ty`). */
export function highlight(code, lang) {
  const lx = lang && code.length < 200_000 ? lexer(lang.toLowerCase()) : null;
  if (!lx) return code;
  const out = [];
  let last = 0;
  for (const m of code.matchAll(lx.re)) {
    let cls = null;
    if (m[1]) cls = 'com';
    else if (m[2]) cls = 'str';
    else if (m[3]) cls = 'num';
    else if (lx.words.has(m[4])) cls = 'kw';
    else if (lx.types && /^[A-Z][a-z]/.test(m[4])) cls = 'ty';
    if (!cls) continue;
    if (m.index > last) out.push(code.slice(last, m.index));
    out.push(h('span', { class: `tok-${cls}` }, m[0]));
    last = m.index + m[0].length;
  }
  if (last < code.length) out.push(code.slice(last));
  return out;
}

// ---- diffs ----

/** Line diff of two texts (LCS; long inputs fall back to all-removed, all-added). */
export function diffLines(oldText, newText) {
  const a = oldText ? oldText.split('\n') : [];
  const b = newText ? newText.split('\n') : [];
  if (a.length * b.length > 4_000_000) {
    return [...a.map((t) => ['-', t]), ...b.map((t) => ['+', t])];
  }
  const n = a.length;
  const m = b.length;
  const dp = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let x = n - 1; x >= 0; x--) {
    for (let y = m - 1; y >= 0; y--) {
      dp[x][y] = a[x] === b[y] ? dp[x + 1][y + 1] + 1 : Math.max(dp[x + 1][y], dp[x][y + 1]);
    }
  }
  const out = [];
  let x = 0;
  let y = 0;
  while (x < n && y < m) {
    if (a[x] === b[y]) { out.push([' ', a[x]]); x++; y++; }
    else if (dp[x + 1][y] >= dp[x][y + 1]) out.push(['-', a[x++]]);
    else out.push(['+', b[y++]]);
  }
  while (x < n) out.push(['-', a[x++]]);
  while (y < m) out.push(['+', b[y++]]);
  return out;
}

/** A coloured diff of a display's `diff` ({path, oldText?, newText}). */
export function diffView(diff) {
  const rows = diffLines(diff.oldText ?? '', diff.newText ?? '');
  const pre = h('pre', { class: 'diff', 'aria-label': `changes to ${diff.path}` });
  for (const [sign, text] of rows) {
    const cls = sign === '+' ? 'add' : sign === '-' ? 'del' : 'ctx';
    pre.append(h('span', { class: cls }, `${sign} ${text}`));
  }
  return pre;
}

// ---- tool cards (from the typed display; never from the tool's name) ----

const KIND_ICON = {
  shell: '$', edit: '✎', write: '✎', read: '▤', search: '⌕', fetch: '⇣', agent: '◆',
  todo: '☑', plan: '☰', mcp: '⧉', other: '•',
};

export function exitText(exit) {
  if (!exit) return null;
  if (exit.type === 'exited') return `exit ${exit.code}`;
  if (exit.type === 'signaled') return `killed by ${exit.signal}`;
  if (exit.type === 'timedOut') return 'timed out';
  return exit.type;
}

function todoList(items) {
  return h('ul', { class: 'todos' }, items.map((t) => h('li', { class: `todo ${t.status}` },
    h('span', { class: 'mark', 'aria-hidden': 'true' }, t.status === 'completed' ? '✓' : t.status === 'in_progress' ? '▸' : '○'),
    ' ', t.content)));
}

/** Fills a tool card's body from its display (called again when the call ends). */
export function fillCard(card, display, ended) {
  const d = display || { kind: 'other', title: 'tool' };
  card.className = `card tool kind-${d.kind || 'other'}${ended?.isError ? ' error' : ''}${ended ? ' ended' : ' running'}`;
  card.dataset.kind = d.kind || 'other';
  const head = h('div', { class: 'card-head' },
    h('span', { class: 'icon', 'aria-hidden': 'true' }, KIND_ICON[d.kind] || '•'),
    h('span', { class: 'title' }, d.title || ''),
    d.subject ? h('code', { class: 'subject' }, d.subject) : null);
  const out = d.output;
  const exit = exitText(out?.exit);
  if (exit) {
    const ok = out.exit.type === 'exited' && out.exit.code === 0;
    head.append(h('span', { class: `exit ${ok ? 'ok' : 'bad'}`, dataset: { exit: exit } }, exit));
  } else if (ended) {
    head.append(h('span', { class: `exit ${ended.isError ? 'bad' : 'ok'}` }, ended.isError ? (ended.errorCode || 'failed') : 'done'));
  } else {
    head.append(h('span', { class: 'exit run' }, 'running'));
  }
  const parts = [head];
  if (d.fields?.length) {
    parts.push(h('dl', { class: 'fields' }, d.fields.map((f) => [h('dt', null, f.label), h('dd', null, f.value)])));
  }
  if (d.diff) parts.push(diffView(d.diff));
  if (d.todos) parts.push(todoList(d.todos));
  if (d.plan) parts.push(h('div', { class: 'plan md' }, markdown(d.plan)));
  if (card._workflow) parts.push(workflowView(card._workflow));
  if (out) {
    if (out.headline) parts.push(h('div', { class: 'headline' }, out.headline));
    if (out.text) {
      const pre = h('pre', { class: 'output' }, out.text);
      parts.push(pre);
    }
    const meta = [];
    if (out.lines !== undefined) meta.push(`${out.lines} lines`);
    if (out.truncated) meta.push('truncated');
    if (out.durationMs !== undefined) meta.push(`${(out.durationMs / 1000).toFixed(1)} s`);
    if (meta.length) parts.push(h('div', { class: 'meta' }, meta.join(' · ')));
  } else if (card._progress) {
    parts.push(h('pre', { class: 'output live' }, card._progress));
  }
  card.replaceChildren(...parts);
}

// ---- workflow runs ----

const AGENT_MARK = { running: '◌', completed: '●', failed: '✗', cancelled: '⊘' };

function usageTokens(u) {
  return u ? (u.inputTokens || 0) + (u.cacheReadTokens || 0) + (u.outputTokens || 0) : 0;
}

// A `workflowProgress` event as a block of the call's card: the run's state, its sub-agents
// (state, phase, tokens once ended; each links to its session).
export function workflowView(p) {
  const agents = p.agents || [];
  const by = (s) => agents.filter((a) => a.state === s).length;
  const states = ['running', 'completed', 'failed', 'cancelled'].filter(by).map((s) => `${by(s)} ${s}`);
  const tokens = agents.reduce((n, a) => n + usageTokens(a.usage), 0);
  const head = [`${agents.length} sub-agent${agents.length === 1 ? '' : 's'}`, ...states].join(', ')
    + (tokens ? ` · ${count(tokens)} tokens` : '');
  return h('div', { class: `workflow status-${p.status}`, dataset: { run: p.runId, status: p.status } },
    h('div', { class: 'wf-head' }, p.status === 'running' ? `Running: ${head}` : `${p.status}: ${head}`),
    h('ol', { class: 'wf-agents' }, agents.map((a) => h('li', { class: `wf-agent state-${a.state}`, dataset: { seq: String(a.seq), state: a.state } },
      h('span', { class: 'mark', 'aria-hidden': 'true' }, AGENT_MARK[a.state] || '•'), ' ',
      a.sessionId ? h('a', { href: `#/s/${encodeURIComponent(a.sessionId)}` }, a.label) : a.label,
      a.phase ? h('span', { class: 'phase' }, ` [${a.phase}]`) : null,
      h('span', { class: 'state' }, ` ${a.state}`),
      a.usage ? h('span', { class: 'tokens' }, ` · ${count(usageTokens(a.usage))} tokens`) : null))));
}

// ---- numbers ----

export function age(ms) {
  const s = Math.max(0, (Date.now() - ms) / 1000);
  if (s < 60) return 'just now';
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86400)} d ago`;
}

export function money(usd) {
  if (usd === undefined || usd === null) return '–';
  return usd < 0.01 ? `$${usd.toFixed(4)}` : `$${usd.toFixed(2)}`;
}

export function count(n) {
  if (!n) return '0';
  if (n >= 1e6) return `${(n / 1e6).toFixed(1)}M`;
  if (n >= 1e4) return `${Math.round(n / 1e3)}k`;
  if (n >= 1e3) return `${(n / 1e3).toFixed(1)}k`;
  return String(n);
}
