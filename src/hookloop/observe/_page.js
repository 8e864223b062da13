"use strict";
// Builds the timeline from the records inlined in #trace-data (hookloop's JSON-lines
// trace, formats 1, 2 and 3). Every text goes in through textContent: the trace is data,
// never HTML.
(function () {
  const started = performance.now();

  // Format 2 writes what records share once: "$id" where it first appears (a long text as
  // {"$id": id, "$value": text}), {"$ref": id} where it comes again, {"$refs": [first, last]} for a run of them in a list, a key of the
  // data that starts with "$" with one more; ids count per traced agent (path[0]). Put back,
  // each is one shared object. Format 1 records are as they were written.
  function isRun(item) {
    return item !== null && typeof item === "object" && !Array.isArray(item) &&
      Object.keys(item).length === 1 && Array.isArray(item.$refs);
  }
  function resolve(value, shared) {
    if (Array.isArray(value)) {
      const out = [];
      for (const item of value) {
        if (!isRun(item)) { out.push(resolve(item, shared)); continue; }
        const [first, last] = item.$refs;
        for (let n = Number(first.slice(1)); n <= Number(last.slice(1)); n++) out.push(shared.get(first[0] + n));
      }
      return out;
    }
    if (value === null || typeof value !== "object") return value;
    const keys = Object.keys(value);
    if (keys.length === 1 && keys[0] === "$ref") return shared.get(value.$ref);
    if (keys.length === 2 && typeof value.$id === "string" && "$value" in value) {
      shared.set(value.$id, value.$value);  // a long text, written once
      return value.$value;
    }
    const out = {};
    for (const key of keys) {
      if (key === "$id") continue;
      // defineProperty: a key such as "__proto__" is data here, never the prototype.
      Object.defineProperty(out, key.startsWith("$$") ? key.slice(1) : key,
        { value: resolve(value[key], shared), enumerable: true, writable: true, configurable: true });
    }
    if (typeof value.$id === "string") shared.set(value.$id, out);
    return out;
  }
  const scopes = new Map();
  const records = JSON.parse(document.getElementById("trace-data").textContent);
  for (const r of records) {
    if (r.v !== 2 && r.v !== 3) continue;  // format 3 refers as format 2 does
    const root = (r.path || [r.agent])[0];
    if (!scopes.has(root)) scopes.set(root, new Map());
    r.data = resolve(r.data, scopes.get(root));
  }
  const end = records.reduce((most, r) => Math.max(most, r.t), 0);
  const span = end > 0 ? end : 1;
  const itemsById = new Map();
  let nextId = 0;

  // -- reading the records into chats, model calls and tool calls ------------------------

  // Chat ids are numbered per traced agent (path[0]): two agents may share one file.
  const chats = new Map();
  function chatKey(root, chat) { return root + "\u0000" + (chat || ""); }
  function chatOf(r) {
    const root = (r.path || [r.agent])[0];
    const id = chatKey(root, r.chat);
    let chat = chats.get(id);
    if (!chat) {
      chat = { kind: "chat", id, root, outside: !r.chat, agent: r.agent,
        path: r.path || [r.agent], parent: r.parent,
        start: r.t, end: r.t, status: r.chat ? "running" : "", items: [], records: [],
        models: new Map(), tools: new Map(), open: null, usage: null, leftOut: null,
        iteration: null };
      chats.set(id, chat);
    }
    chat.end = Math.max(chat.end, r.t);
    chat.records.push(r);
    return chat;
  }

  function modelCall(chat, iteration, r) {
    let item = chat.models.get(iteration);
    if (!item) {
      item = { kind: "model", iteration, start: r.t, end: r.t, attempts: [], records: [] };
      chat.models.set(iteration, item);
      chat.items.push(item);
    }
    item.records.push(r);
    return item;
  }

  function toolCall(chat, call, r) {
    const id = call && call.id;
    let item = chat.tools.get(id);
    if (!item) {
      item = { kind: "tool", id, call, start: r.t, end: null, hooks: [], records: [], children: [] };
      chat.tools.set(id, item);
      chat.items.push(item);
    }
    item.records.push(r);
    return item;
  }

  function addHooks(item, r) {
    for (const h of r.hooks || []) if (!item.hooks.includes(h)) item.hooks.push(h);
  }

  // An "after" record (the handlers' changes) belongs to the item of its "before" record.
  const bySeq = new Map();
  function later(r) {
    const target = bySeq.get(r.of);
    if (target) target.records.push(r);
    return target;
  }

  const handlers = {
    on_chat_start(chat, r, d) { chat.start = r.t; chat.prompt = d.message; },
    on_chat_done(chat, r, d) {
      chat.status = "done"; chat.usage = d.response.usage;
      chat.answer = d.response.message; chat.iterations = d.response.iterations;
    },
    on_chat_abort(chat, r, d) { chat.status = "cancelled"; chat.reason = d.reason; },
    on_chat_error(chat, r, d) { chat.status = "failed"; chat.error = d.error; },
    on_message(chat, r, d) {
      if (d.message.role === "user" && chat.prompt && d.message.id !== chat.prompt.id) {
        chat.items.push({ kind: "event", event: "on_message", start: r.t, end: r.t, records: [r],
          summary: "user: " + text(d.message.content) });
      }
    },
    pre_request(chat, r, d) {
      if (r.stage === "after") {
        const attempt = later(r);
        if (attempt) {
          attempt.changed = d.changed;
          if (d.request) attempt.request = d.request;
          if (d.model) attempt.model = d.model;
          attempt.passed = true;
          attempt.sent = r.t;
        }
        return;
      }
      chat.iteration = d.iteration;
      const item = modelCall(chat, d.iteration, r);
      const attempt = { kind: "attempt", n: d.attempt, start: r.t, end: null, request: d.request,
        model: d.model, hooks: r.hooks || [], records: [r], iteration: d.iteration };
      item.attempts.push(attempt);
      bySeq.set(r.seq, attempt);
    },
    after_model_call(chat, r, d) {
      if (r.stage === "after") {  // the handlers decided: a retry, another request or model
        const attempt = later(r);
        if (attempt) {
          attempt.decided = r.t;
          if (d.retry !== undefined) attempt.retry = d.retry;
        }
        return;
      }
      const item = modelCall(chat, d.iteration, r);
      let attempt = item.attempts.find((a) => a.n === d.attempt && a.end === null);
      if (!attempt) {
        attempt = { kind: "attempt", n: d.attempt, start: r.t, records: [], hooks: [] };
        item.attempts.push(attempt);
      }
      attempt.records.push(r);
      Object.assign(attempt, { end: r.t, request: d.request, response: d.response,
        error: d.error, retry: d.retry, model: d.model });
      bySeq.set(r.seq, attempt);
      item.end = r.t;
    },
    on_response(chat, r, d) {
      if (r.stage === "after") {
        const attempt = later(r);
        if (attempt && d.response) { attempt.response = d.response; attempt.replaced = true; }
        return;
      }
      const item = modelCall(chat, d.iteration, r);
      const attempt = item.attempts[item.attempts.length - 1];
      if (!attempt) return;
      attempt.records.push(r);
      bySeq.set(r.seq, attempt);
      if (attempt.end === null) {  // a pre_request hook answered instead of the model
        Object.assign(attempt, { end: r.t, response: d.response, supplied: true });
        item.end = r.t;
      }
    },
    pre_tool_call(chat, r, d) {
      if (r.stage === "after") {
        const item = later(r);
        if (item) {
          item.passed = true;
          if (d.call) item.rewritten = d.call;
        }
        return;
      }
      const item = toolCall(chat, d.call, r);
      addHooks(item, r);
      item.start = r.t;
      item.before = r.stage === "before";
      bySeq.set(r.seq, item);
    },
    on_tool_call_result(chat, r, d) { toolEnd(chat, r, d, "result"); },
    on_tool_call_error(chat, r, d) { toolEnd(chat, r, d, "error"); },
    on_first_chunk(chat, r, d) {
      const attempt = attemptOf(chat, d, r);
      if (attempt.firstChunk === undefined) attempt.firstChunk = r.t;
    },
    on_backoff_wait(chat, r, d) {
      const attempt = attemptOf(chat, d, r);
      const seconds = typeof d.seconds === "number" ? d.seconds : 0;
      attempt.wait = { kind: "wait", start: r.t, end: Math.min(r.t + seconds, end), seconds,
        next: d.attempt + 1, reason: typeof d.reason === "string" ? d.reason : d.error && d.error.error_type,
        retryAfter: d.retry_after, strategy: d.strategy, error: d.error, records: [r] };
    },
    // The messages a policy leaves out: they join the on_trim / on_compaction that reports
    // the change (see settle), or stand as a row of their own.
    on_pre_compress(chat, r, d) { chat.leftOut = r; },
    on_trim(chat, r, d) { contextRow(chat, r, d, "trim"); },
    on_compaction(chat, r, d) { contextRow(chat, r, d, "compaction"); },
  };

  // The attempt an event of a model call names (iteration, attempt): the open one, or else
  // the last one with that number.
  function attemptOf(chat, d, r) {
    const item = modelCall(chat, d.iteration, r);
    const same = item.attempts.filter((a) => a.n === d.attempt);
    let attempt = same.find((a) => a.end === null) || same[same.length - 1];
    if (!attempt) {
      attempt = { kind: "attempt", n: d.attempt, start: r.t, end: null, records: [], hooks: [] };
      item.attempts.push(attempt);
    }
    attempt.records.push(r);
    return attempt;
  }

  function contextRow(chat, r, d, what) {
    const row = { kind: "context", what, start: r.t, end: r.t, records: [r], data: d,
      iteration: d.iteration, leftOut: chat.leftOut };
    if (chat.leftOut) { row.records.unshift(chat.leftOut); chat.leftOut = null; }
    chat.items.push(row);
    // After its attempt ended, a trim or a compaction is that attempt's recovery from an
    // overflow: the next attempt follows at once, with no wait to infer.
    const call = chat.models.get(d.iteration);
    const attempt = call && call.attempts.findLast((a) => a.n === d.attempt);
    if (attempt && attempt.end !== null) attempt.recovered = true;
  }

  // An on_pre_compress not followed at once by the on_trim or on_compaction that reports it:
  // the loop fires it once the policy's handler returned, so it follows the trim or
  // compaction of the same model call (a summary's messages go once the summary is
  // committed: they join the summary, even when a window's trim came between), or it holds
  // messages a policy of the user's own left out.
  function settle(chat) {
    const r = chat.leftOut;
    chat.leftOut = null;
    const open = chat.items.filter((i) => i.kind === "context" && i.data && !i.leftOut &&
      i.iteration === chat.iteration);
    const reported = open.find((i) => i.what === "compaction" && i.data.tier === "summary") ||
      open[open.length - 1];
    if (reported) {
      reported.leftOut = r;
      reported.records.push(r);
      return;
    }
    const n = ((r.data || {}).messages || []).length;
    chat.items.push({ kind: "context", what: "left out", start: r.t, end: r.t, records: [r], leftOut: r,
      summary: plural(n, "message") + " left out" });
  }

  function toolEnd(chat, r, d, what) {
    if (r.stage === "after") {
      const item = later(r);
      if (item && d[what] !== undefined) { item[what] = d[what]; item.replaced = true; }
      return;
    }
    const item = toolCall(chat, d.call, r);
    addHooks(item, r);
    bySeq.set(r.seq, item);
    if (item.before && !item.passed && !item.end) item.shortCircuit = true;
    if (what === "error") { item.error = d.error; item.attempt = d.attempt; item.result = undefined; }
    else { item.result = d.result; item.error = undefined; }
    item.end = r.t;
  }

  for (const r of records) {
    if (r.event === "on_subagent_event") continue;  // its event is recorded on its own
    const chat = chatOf(r);
    if (chat.leftOut && r.event !== "on_trim" && r.event !== "on_compaction") settle(chat);
    const handle = handlers[r.event];
    if (handle) handle(chat, r, r.data || {});
    else if (r.stage === "after") {
      const item = later(r);
      if (item) item.changed = (r.data || {}).changed;
    } else {
      const item = { kind: "event", event: r.event, start: r.t, end: r.t, records: [r],
        summary: scalars(r.data), hooks: r.hooks || [] };
      bySeq.set(r.seq, item);
      chat.items.push(item);
    }
  }

  for (const chat of chats.values()) if (chat.leftOut) settle(chat);

  // Sub-agent chats go under the tool call (or else the chat) they ran for.
  const roots = [];
  for (const chat of chats.values()) {
    const parent = chat.parent && chats.get(chatKey(chat.root, chat.parent.chat));
    if (!parent) { roots.push(chat); continue; }
    const call = chat.parent.call && parent.tools.get(chat.parent.call);
    if (call) call.children.push(chat);
    else parent.items.push(chat);
  }

  // -- helpers -------------------------------------------------------------------------

  function text(v) {
    if (v === null || v === undefined) return "";
    if (typeof v === "string") return v;
    if (typeof v === "object" && !Array.isArray(v) && Object.keys(v).length === 1 && "chars" in v)
      return "(not captured: " + v.chars + " characters)";
    if (Array.isArray(v)) return v.map((p) => (p && p.text !== undefined ? text(p.text) : text(p))).join(" ");
    return JSON.stringify(v);
  }
  function excerpt(v, n) {
    const s = text(v).replace(/\s+/g, " ").trim();
    return s.length > n ? s.slice(0, n - 1) + "\u2026" : s;
  }
  function ms(seconds) {
    if (seconds === null || seconds === undefined) return "";
    return seconds >= 1 ? seconds.toFixed(2) + " s" : (seconds * 1000).toFixed(1) + " ms";
  }
  function scalars(data) {
    if (!data) return "";
    return Object.entries(data)
      .filter(([, v]) => v === null || ["string", "number", "boolean"].includes(typeof v) || (v && "chars" in v))
      .slice(0, 4).map(([k, v]) => k + " " + excerpt(v, 40)).join(", ");
  }
  function errorText(e) { return e ? (e.error_type || "Error") + ": " + text(e.text) : ""; }
  function el(tag, cls, content) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (content !== undefined) node.textContent = content;
    return node;
  }
  // A cost in US dollars, or "cost unknown" (not priced, or a trace from before costs):
  // never shown as 0 when it is not known.
  function costText(cost) {
    return typeof cost === "number" ? "$" + parseFloat(cost.toPrecision(4)) : "cost unknown";
  }
  function tokensOf(attempt) {
    const usage = attempt.response && attempt.response.usage;
    const reported = usage ? usage.input_tokens : 0;
    const estimated = attempt.request && attempt.request.tokens;
    return { input: reported || estimated || 0, output: usage ? usage.output_tokens : 0,
      estimated: !reported, reported: Boolean(usage), cost: usage ? usage.cost : undefined };
  }

  // -- the rows --------------------------------------------------------------------------

  function describe(item) {
    if (item.kind === "chat" && item.outside) {
      return { kind: "outside a chat", label: item.agent, meta: item.items.length + " events" };
    }
    if (item.kind === "chat") {
      const usage = item.usage ? " \u00b7 " + item.usage.input_tokens + " in / " + item.usage.output_tokens + " out \u00b7 " + costText(item.usage.cost) : "";
      return { kind: (item.parent ? "sub-agent " : "chat ") + item.agent,
        label: excerpt(item.prompt && item.prompt.content, 60),
        meta: [item.status, item.models.size + " model call" + (item.models.size === 1 ? "" : "s"),
          item.tools.size + " tool call" + (item.tools.size === 1 ? "" : "s")].filter(Boolean).join(" \u00b7 ") + usage,
        error: item.status === "failed" || item.status === "cancelled" };
    }
    if (item.kind === "model") {
      const last = item.attempts[item.attempts.length - 1] || {};
      const tokens = tokensOf(last);
      const n = item.attempts.length;
      const outcome = last.error ? errorText(last.error) : last.response ? answerOf(last.response) : "no answer";
      return { kind: "model call " + (item.iteration + 1), label: (last.model && last.model.name) || "",
        meta: (n > 1 ? n + " attempts \u00b7 " : "") + tokens.input + (tokens.estimated ? " (est.)" : "") + " in / " + tokens.output + " out" + (tokens.reported ? " \u00b7 " + costText(tokens.cost) : ""),
        outcome, window: windowOf(last, tokens), error: Boolean(last.error) };
    }
    if (item.kind === "attempt") {
      return { kind: "attempt " + item.n, label: (item.model && item.model.name) || "",
        outcome: item.error ? errorText(item.error) + (item.retry ? ", retried" : "") : item.supplied ? "answered by a hook" : "ok",
        error: Boolean(item.error) };
    }
    if (item.kind === "wait") {
      const seconds = item.seconds !== undefined ? item.seconds : item.end - item.start;
      return { kind: "wait", label: ms(seconds) + " before attempt " + item.next,
        outcome: [item.reason, item.retryAfter != null ? "Retry-After " + ms(item.retryAfter) : ""]
          .filter(Boolean).join(" \u00b7 ") };
    }
    if (item.kind === "context") return describeContext(item);
    if (item.kind === "tool") {
      const call = item.call || {};
      const badges = [];
      if (item.shortCircuit) badges.push("short-circuited by a hook");
      if (item.rewritten) badges.push("call rewritten by a hook");
      if (item.replaced) badges.push("outcome replaced by a hook");
      if (item.error && item.attempt > 1) badges.push(item.attempt + " runs");
      return { kind: "tool " + (call.name || "?"), label: "(" + excerpt(call.arguments, 40) + ")",
        outcome: item.error ? errorText(item.error) : "\u2192 " + excerpt(item.result, 60),
        meta: item.hooks.length ? "hooks: " + item.hooks.join(", ") : "", badges, error: Boolean(item.error) };
    }
    return { kind: item.event, label: item.summary || "" };
  }

  const TIERS = { summary: "old turns summarised", tool_results: "tool results shortened",
    old_turns: "old turns dropped" };
  function describeContext(item) {
    const d = item.data;
    if (!d) return { kind: "context", label: item.summary };
    const change = d.messages_before + " \u2192 " + d.messages_after + " messages, " +
      d.tokens_before + " \u2192 " + d.tokens_after + " tokens";
    const window = typeof d.window === "number" ? d.window + "-token window" : "";
    if (item.what === "trim") {
      const how = d.reason === "overflow" ? "trimmed after an overflow" : "trimmed";
      return { kind: "context", label: how + ": " + change,
        meta: ["budget " + d.budget + " tokens", window].filter(Boolean).join(" of a ") };
    }
    let how = typeof d.tier === "string" ? TIERS[d.tier] || d.tier : "compacted";
    // A summary replaces stored messages, some of which the request may not have held (a
    // window left them out): how many is said, beside what the request went from and to.
    const summarised = d.tier === "summary" && goingOf(item);
    if (summarised) how += " (" + plural(summarised.length, "stored message") + ")";
    return { kind: "context", label: how + ": " + change, meta: window };
  }
  function goingOf(item) { return item.leftOut && (item.leftOut.data || {}).messages; }

  function answerOf(response) {
    if (response.tool_calls && response.tool_calls.length)
      return "calls " + response.tool_calls.map((c) => c.name).join(", ");
    return "\u201c" + excerpt(response.content, 50) + "\u201d";
  }

  function windowOf(attempt, tokens) {
    const size = attempt.model && attempt.model.window;
    if (!size) return null;
    return { used: tokens.input, size };
  }

  function childrenOf(item) {
    if (item.kind === "chat") return [...item.items].sort((a, b) => a.start - b.start);
    if (item.kind === "tool") return item.children;
    if (item.kind === "model" && (item.attempts.length > 1 || item.attempts.some((a) => a.wait))) {
      const out = [];
      item.attempts.forEach((a, i) => {
        const prev = item.attempts[i - 1];
        if (prev && prev.wait) out.push(prev.wait);
        else if (prev && !prev.recovered && prev.end !== null && a.start > prev.end)  // a wait no strategy reported
          out.push({ kind: "wait", start: prev.end, end: a.start, next: a.n, records: [] });
        out.push(a);
      });
      const last = item.attempts[item.attempts.length - 1];
      if (last && last.wait) out.push(last.wait);  // the run ended while it waited
      return out;
    }
    return [];
  }

  let rows = 0;
  function render(item, depth, parentList) {
    rows += 1;
    const id = "item-" + nextId++;
    itemsById.set(id, item);
    const info = describe(item);
    const li = el("li", "k-" + item.kind + (info.error ? " error" : ""));
    li.id = id;
    li.setAttribute("role", "treeitem");
    li.setAttribute("aria-level", String(depth + 1));
    li.setAttribute("aria-selected", "false");
    li.tabIndex = -1;
    const row = el("div", "row");
    row.style.setProperty("--depth", depth);
    const label = el("div", "label");
    const head = el("div", "head");
    head.append(el("span", "twisty"), el("span", "kind", info.kind), " ", el("span", "name", info.label));
    for (const b of info.badges || []) head.append(" ", el("span", "badge", b));
    const sub = el("div", "sub");
    if (info.outcome) sub.append(el("span", "outcome", info.outcome), " ");
    if (info.meta) sub.append(el("span", "meta", info.meta), " ");
    if (info.window) {
      const share = info.window.used / info.window.size;
      const bar = el("span", "window" + (share > 0.9 ? " full" : ""));
      bar.title = info.window.used + " of " + info.window.size + " tokens of the context window";
      bar.setAttribute("role", "img");
      bar.setAttribute("aria-label", bar.title);
      const fill = el("span");
      fill.style.width = Math.min(100, share * 100).toFixed(1) + "%";
      bar.append(fill);
      sub.append(bar, " ");
    }
    const stop = item.end === null || item.end === undefined ? end : item.end;
    if (item.kind !== "event" && item.kind !== "context") sub.append(el("span", "meta", ms(stop - item.start)));
    label.append(head);
    if (sub.childNodes.length) label.append(sub);
    const lane = el("div", "lane");
    const bar = el("span", "bar");
    bar.style.left = ((item.start / span) * 100).toFixed(2) + "%";
    bar.style.width = Math.max(0.3, ((stop - item.start) / span) * 100).toFixed(2) + "%";
    lane.title = ms(item.start) + " + " + ms(stop - item.start);
    lane.append(bar);
    row.append(label, lane);
    li.append(row);
    const children = childrenOf(item);
    if (children.length) {
      li.setAttribute("aria-expanded", item.kind === "model" ? "false" : "true");
      const group = el("ul");
      group.setAttribute("role", "group");
      for (const child of children) render(child, depth + 1, group);
      li.append(group);
    }
    parentList.append(li);
  }

  const tree = document.getElementById("tree");
  for (const chat of roots) render(chat, 0, tree);
  const first = tree.querySelector("[role=treeitem]");
  if (first) first.tabIndex = 0;

  // -- the summary line ----------------------------------------------------------------

  // The run's cost: every answered model call's, sub-agents' included; unknown as soon as
  // one answer's is.
  let tokensIn = 0, tokensOut = 0, models = 0, tools = 0, failures = 0, cost = 0;
  for (const chat of chats.values()) {
    for (const m of chat.models.values()) {
      models += 1;
      for (const a of m.attempts) {
        const usage = a.response && a.response.usage;
        if (usage) {
          tokensIn += usage.input_tokens; tokensOut += usage.output_tokens;
          cost = typeof cost === "number" && typeof usage.cost === "number" ? cost + usage.cost : null;
        }
        if (a.error) failures += 1;
      }
    }
    for (const t of chat.tools.values()) { tools += 1; if (t.error) failures += 1; }
  }
  const chatCount = [...chats.values()].filter((c) => !c.outside).length;
  document.getElementById("summary").textContent = [
    records.length + " events", chatCount + " chat" + (chatCount === 1 ? "" : "s"),
    models + " model calls", tools + " tool calls", failures + " failures",
    tokensIn + " tokens in / " + tokensOut + " out", costText(cost), ms(end),
  ].join(" \u00b7 ");

  // -- details -------------------------------------------------------------------------

  const details = document.getElementById("details");
  function facts(pairs) {
    const dl = el("dl");
    for (const [k, v] of pairs) {
      if (v === undefined || v === null || v === "") continue;
      dl.append(el("dt", "", k), el("dd", "", String(v)));
    }
    return dl;
  }
  function messages(list) {
    const box = el("div");
    for (const m of list || []) {
      const node = el("div", "msg");
      node.append(el("span", "role", m.role + (m.tool_name ? " " + m.tool_name : "")));
      const calls = (m.tool_calls || []).map((c) => "\u2192 " + c.name + "(" + text(c.arguments) + ")");
      node.append(document.createTextNode([text(m.content), ...calls].filter(Boolean).join("\n")));
      box.append(node);
    }
    return box;
  }
  function section(title, node) { details.append(el("h3", "", title), node); }
  // From the request leaving (the pre_request handlers done) to the first streamed chunk.
  function firstChunkOf(attempt) {
    if (attempt.firstChunk === undefined) return "";
    return ms(attempt.firstChunk - (attempt.sent !== undefined ? attempt.sent : attempt.start));
  }
  function waitsOf(model) {
    return model.attempts.filter((a) => a.wait)
      .map((a) => describe(a.wait).label + (a.wait.reason ? " (" + a.wait.reason + ")" : "")).join(", ");
  }
  function plural(n, what) { return n + " " + what + (n === 1 ? "" : "s"); }

  function show(item) {
    const info = describe(item);
    details.replaceChildren(el("h2", "", info.kind + " " + (info.label || "")));
    const stop = item.end === null || item.end === undefined ? end : item.end;
    const pairs = [["started", ms(item.start)], ["took", ms(stop - item.start)],
      ["outcome", info.outcome]];
    const sections = [];
    if (item.kind === "chat") {
      pairs.push(["agent path", item.path.join(" \u203a ")], ["status", item.status],
        ["tokens", item.usage ? item.usage.input_tokens + " in / " + item.usage.output_tokens + " out" : ""],
        ["cost", item.usage ? costText(item.usage.cost) : ""],
        ["iterations", item.iterations], ["reason", item.reason && text(item.reason)],
        ["error", errorText(item.error)]);
      if (item.prompt) sections.push(["Prompt", messages([item.prompt])]);
      if (item.answer) sections.push(["Answer", messages([item.answer])]);
    } else if (item.kind === "model" || item.kind === "attempt") {
      const attempt = item.kind === "model" ? item.attempts[item.attempts.length - 1] : item;
      const tokens = tokensOf(attempt);
      const win = windowOf(attempt, tokens);
      pairs.push(["model", attempt.model && attempt.model.name],
        ["request tokens", tokens.input + (tokens.estimated ? " (estimated)" : " (reported)")],
        ["context window", win ? win.size + " tokens (" + ((win.used / win.size) * 100).toFixed(1) + "% used)" : ""],
        ["output tokens", tokens.output],
        ["cost", tokens.reported ? costText(tokens.cost) : ""],
        ["finish reason", attempt.response && attempt.response.finish_reason],
        ["time to first chunk", firstChunkOf(attempt)],
        ["backoff waits", item.kind === "model" ? waitsOf(item) : ""],
        ["hooks", (attempt.hooks || []).join(", ")], ["changed by hooks", (attempt.changed || []).join(", ")]);
      const req = attempt.request;
      if (req) {
        if (req.system) sections.push(["System prompt", messages([{ role: "system", content: req.system }])]);
        sections.push(["Request (" + plural((req.messages || []).length, "message") + ", " + plural((req.tools || []).length, "tool") + ")", messages(req.messages)]);
      }
      if (attempt.response) sections.push(["Response", messages([{ role: "assistant", content: attempt.response.content, tool_calls: attempt.response.tool_calls }])]);
    } else if (item.kind === "tool") {
      const call = item.rewritten || item.call || {};
      pairs.push(["call id", call.id], ["arguments", text(call.arguments)],
        ["hooks", item.hooks.join(", ")], ["error", errorText(item.error)],
        ["result", item.error ? "" : text(item.result)]);
    } else if (item.kind === "wait") {
      pairs.push(["waited", item.seconds !== undefined ? ms(item.seconds) : ""], ["reason", item.reason],
        ["error", errorText(item.error)], ["Retry-After", item.retryAfter != null ? ms(item.retryAfter) : ""],
        ["strategy", typeof item.strategy === "string" ? item.strategy : ""]);
      if (!item.records.length) pairs.push(["measured", "the time between the attempts (no strategy reported it)"]);
    } else if (item.kind === "context") {
      const d = item.data || {};
      if (item.data) {
        pairs.push([item.what === "trim" ? "reason" : "tier", item.what === "trim" ? text(d.reason) : text(d.tier)],
          ["model call", (d.iteration + 1) + ", attempt " + d.attempt],
          ["messages", d.messages_before + " \u2192 " + d.messages_after],
          [item.what === "trim" ? "tokens (messages)" : "tokens (request, estimated)", d.tokens_before + " \u2192 " + d.tokens_after],
          ["budget", d.budget !== undefined ? d.budget + " tokens" : ""],
          ["context window", typeof d.window === "number" ? d.window + " tokens" : ""]);
      }
      const going = goingOf(item);
      const title = !item.data ? "Left out" : d.tier === "summary" ? "Summarised" : "Newly left out";
      if (going) sections.push([title + " (" + plural(going.length, "message") + ")", messages(going)]);
    } else if (item.kind === "event") {
      for (const r of item.records) for (const [k, v] of Object.entries(r.data || {})) pairs.push([k, text(v)]);
    }
    details.append(facts(pairs));
    for (const [title, node] of sections) section(title, node);
    const raw = el("details");
    raw.append(el("summary", "", "Records (" + item.records.length + ")"),
      el("pre", "", item.records.map((r) => JSON.stringify(r, null, 1)).join("\n")));
    details.append(raw);
  }

  // -- selection and the keyboard (the WAI-ARIA tree pattern) --------------------------

  let selected = null;
  function select(li) {
    if (selected) selected.setAttribute("aria-selected", "false");
    selected = li;
    li.setAttribute("aria-selected", "true");
    show(itemsById.get(li.id));
  }
  function focus(li) {
    for (const other of tree.querySelectorAll("[role=treeitem][tabindex='0']")) other.tabIndex = -1;
    li.tabIndex = 0;
    li.focus();
  }
  function visible() {
    return [...tree.querySelectorAll("[role=treeitem]")].filter(
      (li) => !li.parentElement.closest("[aria-expanded=false]"));
  }
  function toggle(li, open) {
    if (li.hasAttribute("aria-expanded")) li.setAttribute("aria-expanded", String(open));
  }
  tree.addEventListener("click", (event) => {
    const li = event.target.closest("[role=treeitem]");
    if (!li) return;
    if (event.target.closest(".twisty")) toggle(li, li.getAttribute("aria-expanded") !== "true");
    focus(li);
    select(li);
  });
  tree.addEventListener("keydown", (event) => {
    const li = event.target.closest("[role=treeitem]");
    if (!li) return;
    const list = visible();
    const at = list.indexOf(li);
    let next = null;
    switch (event.key) {
      case "ArrowDown": next = list[at + 1]; break;
      case "ArrowUp": next = list[at - 1]; break;
      case "Home": next = list[0]; break;
      case "End": next = list[list.length - 1]; break;
      case "ArrowRight":
        if (li.getAttribute("aria-expanded") === "false") toggle(li, true);
        else if (li.getAttribute("aria-expanded") === "true") next = li.querySelector("[role=treeitem]");
        break;
      case "ArrowLeft":
        if (li.getAttribute("aria-expanded") === "true") toggle(li, false);
        else next = li.parentElement.closest("[role=treeitem]");
        break;
      case "Enter": case " ": select(li); break;
      default: return;
    }
    event.preventDefault();
    if (next) focus(next);
  });

  // What bench/trace_page.py reads: the script's own time, and the time since navigation
  // began (the file read, the HTML and the inlined data parsed, the timeline built).
  const now = performance.now();
  window.hookloopTrace = { records: records.length, rows, scriptMs: now - started, loadMs: now };
})();
