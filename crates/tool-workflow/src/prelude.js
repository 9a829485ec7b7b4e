// The workflow script's API, over the host functions the engine installs (removed from the
// global object here, so the script sees only this API).
(function (g) {
  "use strict";
  const host = {
    start: g.__dsh_start, wait: g.__dsh_wait, tool: g.__dsh_tool, log: g.__dsh_log,
    done: g.__dsh_done, fail: g.__dsh_fail, notJson: g.__dsh_not_json,
  };
  for (const k of ["__dsh_start", "__dsh_wait", "__dsh_tool", "__dsh_log", "__dsh_done",
    "__dsh_fail", "__dsh_not_json"]) delete g[k];

  // Each started sub-agent's promise (hidden from the script) and its resolver, until the
  // engine hands it the sub-agent's result (`__dsh_deliver`, called as each one ends).
  const promises = new WeakMap();
  const resolvers = new Map();

  // A started sub-agent: `await` it (or `wait(run)`) for its result. Its promise never
  // rejects: a failed sub-agent resolves with `ok: false`.
  class AgentRun {
    constructor(seq, label) { this.seq = seq; this.label = label; Object.freeze(this); }
    result() { return JSON.parse(host.wait(this.seq)); }
    then(ok, err) { return promises.get(this).then(ok, err); }
  }

  function start(options, fork) {
    if (typeof options === "string") options = { prompt: options };
    if (options === null || typeof options !== "object") {
      throw new TypeError("agent(options): options must be an object or a prompt string");
    }
    const o = Object.assign({}, options);
    if (fork) o.fork = true;
    const seq = host.start(JSON.stringify(o));
    const run = new AgentRun(seq, o.label === undefined ? null : String(o.label));
    promises.set(run, new Promise((resolve) => resolvers.set(seq, resolve)));
    return run;
  }

  g.__dsh_deliver = (seq, json) => {
    const resolve = resolvers.get(seq);
    if (resolve === undefined) return;
    resolvers.delete(seq);
    resolve(JSON.parse(json));
  };

  g.agent = (options) => start(options, false);
  g.fork = (options) => start(options, true);
  g.wait = (run) => {
    if (!(run instanceof AgentRun)) throw new TypeError("wait(run): not a started agent");
    return run.result();
  };
  g.waitAll = (runs) => Array.from(runs, (r) => g.wait(r));

  // Each running tool call's resolvers, until the engine hands it the answer
  // (`__dsh_deliver_tool`, called as each call ends): a promise of the text, rejected with an
  // Error of the tool's error text.
  const toolCalls = new Map();
  g.__dsh_deliver_tool = (id, ok, text) => {
    const call = toolCalls.get(id);
    if (call === undefined) return;
    toolCalls.delete(id);
    if (ok) call.resolve(text); else call.reject(new Error(text));
  };
  const tools = {};
  for (const name of g.__dsh_tool_names) {
    tools[name] = (args) => {
      const id = host.tool(name, JSON.stringify(args === undefined ? {} : args));
      return new Promise((resolve, reject) => toolCalls.set(id, { resolve, reject }));
    };
  }
  delete g.__dsh_tool_names;
  g.tools = Object.freeze(tools);
  const line = (args) => args.map((a) => (typeof a === "string" ? a : JSON.stringify(a))).join(" ");
  g.console = Object.freeze({
    log: (...a) => host.log(line(a)), info: (...a) => host.log(line(a)),
    warn: (...a) => host.log(line(a)), error: (...a) => host.log(line(a)),
  });

  const describe = (e) => {
    if (e instanceof Error) {
      const stack = typeof e.stack === "string" && e.stack.trim() ? "\n" + e.stack.trim() : "";
      return e.name + ": " + e.message + stack;
    }
    try { return "uncaught " + JSON.stringify(e); } catch (_) { return "uncaught " + String(e); }
  };
  g.__dsh_finish = (p) => {
    delete g.__dsh_finish;
    p.then((v) => {
      let s;
      try { s = JSON.stringify(v === undefined ? null : v); } catch (e) { return host.notJson(String(e)); }
      if (s === undefined) return host.notJson("a " + typeof v);
      host.done(s);
    }, (e) => host.fail(describe(e)));
  };
})(globalThis);
