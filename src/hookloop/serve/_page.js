"use strict";
// The chat page of `hookloop serve`: AG-UI over SSE (fetch streams), against this server only.
(function () {
  const $ = (id) => document.getElementById(id);
  const log = $("log"), approvals = $("approvals"), input = $("message");
  let token = sessionStorage.getItem("hookloop-token") || "";
  const fromHash = new URLSearchParams(location.hash.slice(1)).get("token");
  if (fromHash) { token = fromHash; sessionStorage.setItem("hookloop-token", token); history.replaceState(null, "", location.pathname + location.search); }
  const params = new URLSearchParams(location.search);
  let thread = params.get("thread") || localStorage.getItem("hookloop-thread") || newId("thread");
  localStorage.setItem("hookloop-thread", thread);
  $("thread").textContent = thread;
  let busy = false, currentRun = null, live = null, messages = [], pending = [];

  function newId(kind) {
    const bytes = new Uint8Array(8); crypto.getRandomValues(bytes);
    return kind + "-" + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  }
  function headers(extra) {
    const h = Object.assign({ "Content-Type": "application/json" }, extra || {});
    if (token) h["Authorization"] = "Bearer " + token;
    return h;
  }
  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function scroll() { log.scrollTop = log.scrollHeight; }
  function notice(text, error) { log.append(el("div", "notice" + (error ? " error" : ""), text)); scroll(); }
  function setBusy(on) {
    busy = on; $("send").disabled = on; $("stop").hidden = !on;
    $("state").textContent = on ? "answering…" : "";
  }
  function needToken() { $("token-form").hidden = false; $("token").focus(); }

  // -- the conversation as the session has it (a MESSAGES_SNAPSHOT, or a reload) -------------
  function render(list) {
    messages = list; log.replaceChildren(); live = null;
    const results = {};
    for (const m of list) if (m.role === "tool") results[m.toolCallId] = m;
    for (const m of list) {
      if (m.role === "user") log.append(el("div", "msg user", typeof m.content === "string" ? m.content : ""));
      else if (m.role === "assistant") {
        if (m.content) log.append(el("div", "msg assistant", m.content));
        for (const c of m.toolCalls || []) log.append(toolBlock(c.id, c.function.name, c.function.arguments, results[c.id]));
      }
    }
    scroll();
  }
  function toolBlock(id, name, args, result) {
    const box = el("div", "tool"); box.dataset.call = id;
    box.append(el("span", "name", name), el("span", "args", "(" + (args || "") + ")"));
    const out = el("div", "result");
    if (result) { out.textContent = result.content; if (result.error) box.classList.add("error"); }
    else out.hidden = true;
    box.append(out);
    return box;
  }

  // -- a run's events as they arrive --------------------------------------------------------
  function handle(event) {
    switch (event.type) {
      case "TEXT_MESSAGE_START": live = el("div", "msg assistant", ""); log.append(live); break;
      case "TEXT_MESSAGE_CONTENT": if (!live) { live = el("div", "msg assistant", ""); log.append(live); } live.textContent += event.delta; break;
      case "TEXT_MESSAGE_END": live = null; break;
      case "TOOL_CALL_START": log.append(toolBlock(event.toolCallId, event.toolCallName, "", null)); break;
      case "TOOL_CALL_ARGS": {
        const box = log.querySelector(`.tool[data-call="${CSS.escape(event.toolCallId)}"] .args`);
        if (box) box.textContent = box.textContent.slice(0, -1) + event.delta + ")";
        break;
      }
      case "TOOL_CALL_RESULT": {
        const out = log.querySelector(`.tool[data-call="${CSS.escape(event.toolCallId)}"] .result`);
        if (out) { out.hidden = false; out.textContent = event.content; }
        break;
      }
      case "MESSAGES_SNAPSHOT": render(event.messages); break;
      case "CUSTOM":
        if (event.name === "hookloop.usage") showSpent(event.value);
        else if (event.name === "hookloop.model_retry") notice("(the model is tried again)");
        break;
      case "RUN_FINISHED":
        if (event.outcome && event.outcome.type === "interrupt") ask(event.outcome.interrupts.map((i) => i.metadata));
        else if (event.outcome && event.outcome.type === "cancelled") notice("(stopped)");
        break;
      case "RUN_ERROR": notice(event.code + ": " + event.message, true); break;
    }
    scroll();
  }
  let spentTotal = null;
  function showSpent(value, whole) {
    if (whole) spentTotal = value;
    else if (spentTotal) spentTotal = { inputTokens: spentTotal.inputTokens + value.inputTokens, outputTokens: spentTotal.outputTokens + value.outputTokens,
      cost: spentTotal.cost === null || value.cost === null ? null : String(Number(spentTotal.cost) + Number(value.cost)) };
    else spentTotal = value;
    const s = spentTotal;
    $("spent").textContent = `tokens: ${s.inputTokens} in / ${s.outputTokens} out · cost: ${s.cost === null ? "unknown" : "$" + s.cost}`;
  }

  // -- a run over SSE: read it all, and reconnect with Last-Event-ID when the stream drops --
  async function stream(url, init, runId) {
    let last = 0, finished = false;
    for (let attempt = 0; attempt < 20 && !finished; attempt++) {
      const h = Object.assign({}, init.headers); if (last) h["Last-Event-ID"] = String(last);
      let response;
      try { response = await fetch(url, Object.assign({}, init, { headers: h })); }
      catch (e) { await pause(attempt); continue; }
      if (response.status === 401) { needToken(); return; }
      if (!response.ok) {
        let body = {}; try { body = await response.json(); } catch (e) { /* not JSON */ }
        notice((body.type || response.status) + ": " + (body.message || response.statusText), true); return;
      }
      showTrace();
      try {
        const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffer = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += value;
          let cut;
          while ((cut = buffer.indexOf("\n\n")) >= 0) {
            const block = buffer.slice(0, cut); buffer = buffer.slice(cut + 2);
            let id = null, data = [];
            for (const line of block.split("\n")) {
              if (line.startsWith("id:")) id = Number(line.slice(3).trim());
              else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
            }
            if (!data.length) continue;
            if (id !== null) last = id;
            const event = JSON.parse(data.join("\n"));
            handle(event);
            if (event.type === "RUN_FINISHED" || event.type === "RUN_ERROR") finished = true;
          }
        }
      } catch (e) { /* the connection dropped: reconnect below */ }
      if (!finished) await pause(attempt);
    }
  }
  function showTrace() {  // a link cannot carry the token: shown on servers without one
    $("trace").href = "api/threads/" + encodeURIComponent(thread) + "/trace";
    $("trace").hidden = !!token || document.body.dataset.trace !== "1";
  }
  function pause(attempt) { return new Promise((r) => setTimeout(r, Math.min(200 * 2 ** attempt, 3000))); }

  async function run(body) {
    approvals.hidden = true; approvals.replaceChildren();
    currentRun = body.runId; setBusy(true);
    try { await stream("agui", { method: "POST", headers: headers(), body: JSON.stringify(body) }, body.runId); }
    finally { setBusy(false); currentRun = null; if (approvals.hidden) input.focus(); }
  }
  async function send(text) {
    const runId = newId("run");
    const user = { id: newId("msg"), role: "user", content: text };
    log.append(el("div", "msg user", text)); scroll();
    await run({ threadId: thread, runId, messages: [user] });  // the session has the rest
  }

  // -- approvals: approve, deny (with a reason), or edit the arguments ----------------------
  function ask(list) {
    pending = list; approvals.replaceChildren();
    if (!list.length) { approvals.hidden = true; return; }
    approvals.append(el("strong", "", list.length === 1 ? "A tool call needs your decision:" : "Tool calls need your decision:"));
    const decisions = {};
    list.forEach((p) => {
      const row = el("div", "approval"); row.dataset.call = p.callId;
      row.append(el("code", "", `${p.toolName}(${p.arguments})` + (p.reason ? ` — ${p.reason}` : "")));
      const approve = el("button", "approve", "Approve"), deny = el("button", "deny", "Deny"), edit = el("button", "edit", "Edit");
      [approve, deny, edit].forEach((b) => (b.type = "button"));
      approve.onclick = () => decide(p, { action: "approve", digest: p.digest });
      deny.onclick = () => {
        const reason = el("input"); reason.placeholder = "why not? (the model reads it)"; reason.setAttribute("aria-label", "reason");
        const go = el("button", "", "Deny it"); go.type = "button";
        go.onclick = () => decide(p, { action: "deny", reason: reason.value.trim() || "the user said no", digest: p.digest });
        reason.onkeydown = (e) => { if (e.key === "Enter") go.click(); };
        row.append(reason, go); reason.focus();
      };
      edit.onclick = () => {
        const args = el("textarea"); args.value = p.arguments; args.setAttribute("aria-label", "arguments as JSON");
        const go = el("button", "", "Run with these"); go.type = "button";
        go.onclick = () => {
          let parsed; try { parsed = JSON.parse(args.value); } catch (e) { notice("the arguments are not JSON", true); return; }
          decide(p, { action: "edit", arguments: parsed, digest: p.digest });
        };
        row.append(args, go); args.focus();
      };
      row.append(approve, deny, edit);
      approvals.append(row);
    });
    approvals.hidden = false;
    approvals.querySelector("button.approve").focus();
    function decide(p, payload) {
      decisions[p.callId] = payload;
      const row = approvals.querySelector(`.approval[data-call="${CSS.escape(p.callId)}"]`);
      row.replaceChildren(el("code", "", `${p.toolName}: ${payload.action}`));
      if (Object.keys(decisions).length === pending.length) {
        const resume = pending.map((q) => ({ interruptId: q.callId, status: "resolved", payload: decisions[q.callId] }));
        run({ threadId: thread, runId: newId("run"), messages: [], resume });
      } else {
        const next = approvals.querySelector("button.approve"); if (next) next.focus();
      }
    }
  }

  // -- the page's controls ------------------------------------------------------------------
  $("ask").onsubmit = (e) => { e.preventDefault(); const text = input.value.trim(); if (!text || busy) return; input.value = ""; send(text); };
  input.onkeydown = (e) => { if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); $("ask").requestSubmit(); } };
  $("stop").onclick = () => { if (currentRun) fetch("api/runs/" + encodeURIComponent(currentRun) + "/cancel", { method: "POST", headers: headers() }); };
  $("new-thread").onclick = () => { localStorage.setItem("hookloop-thread", newId("thread")); location.search = ""; };
  $("token-form").onsubmit = (e) => { e.preventDefault(); token = $("token").value; sessionStorage.setItem("hookloop-token", token); $("token-form").hidden = true; load(); };

  // -- a reload: the conversation, the calls still waiting, a run still going ---------------
  async function load() {
    const response = await fetch("api/threads/" + encodeURIComponent(thread) + "/messages", { headers: headers() });
    if (response.status === 401) { needToken(); return; }
    if (response.status === 404) { render([]); return; }
    if (!response.ok) { notice("the conversation could not be read (" + response.status + ")", true); return; }
    const body = await response.json();
    render(body.messages);
    showTrace();
    if (body.spent && body.spent.requests) showSpent(body.spent, true);
    if (body.running) {
      const runId = body.running.runId; currentRun = runId; setBusy(true);
      try { await stream("api/runs/" + encodeURIComponent(runId) + "/events", { headers: headers({ Accept: "text/event-stream" }) }, runId); }
      finally { setBusy(false); currentRun = null; }
    } else if (body.pending.length) ask(body.pending);
  }
  load();
})();
