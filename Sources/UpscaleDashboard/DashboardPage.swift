/// The dashboard's page: static HTML, CSS and one script, compiled into the binary. The page
/// holds no data; the script fetches the JSON API every 2 seconds and builds every element
/// with `textContent`, so a file name is always text, never markup.
enum DashboardPage {
    static let html = """
    <!doctype html>
    <html lang="en">
    <head>
    <meta charset="utf-8">
    <meta name="viewport" content="width=device-width, initial-scale=1">
    <title>upscale queue</title>
    <link rel="stylesheet" href="/app.css">
    <script src="/app.js" defer></script>
    </head>
    <body>
    <header>
      <h1>upscale <span id="title"></span></h1>
      <span id="paused" class="badge" hidden>paused</span>
      <span id="status" class="muted"></span>
      <span class="spacer"></span>
      <button id="pause" type="button">Pause queue</button>
      <button id="resume" type="button" hidden>Resume queue</button>
    </header>
    <form id="login" hidden>
      <label>This dashboard needs its token: <input id="token" type="password" autocomplete="current-password"></label>
      <button type="submit">Open</button> <span id="login-error" class="error"></span>
    </form>
    <main>
      <section id="totals" class="totals" aria-label="Totals"></section>
      <section class="panel">
        <h2>Throughput, last 6 hours <span class="muted">(frames/s per 15 min)</span></h2>
        <div class="chart-scale"><span id="chart-max"></span></div>
        <svg id="chart" viewBox="0 0 480 90" preserveAspectRatio="none" role="img" aria-label="frames per second over time"></svg>
        <div class="chart-axis"><span>6 h ago</span><span>now</span></div>
      </section>
      <section class="panel">
        <h2>Workers</h2>
        <table id="workers"><thead><tr><th>worker</th><th>working on</th><th>fps</th><th>last heard</th></tr></thead><tbody></tbody></table>
        <p id="no-workers" class="muted" hidden>No worker heard from in the last hour.</p>
      </section>
      <section class="panel">
        <h2>Jobs <span id="job-count" class="muted"></span></h2>
        <table id="jobs"><thead><tr>
          <th>file</th><th>state</th><th>progress</th><th class="n">fps</th><th class="n">ETA</th>
          <th class="wide n">chunks</th><th class="wide">machine</th><th class="wide n">tries</th><th>error</th><th></th>
        </tr></thead><tbody></tbody></table>
        <button id="more" type="button" hidden>Show more</button>
      </section>
    </main>
    </body>
    </html>

    """

    static let style = """
    :root { color-scheme: light dark; --fg: #1c1e21; --muted: #6b7280; --line: #e5e7eb; --bg: #fff; --panel: #f8f9fb;
      --accent: #2563eb; --bad: #b91c1c; --good: #15803d; --warn: #b45309; }
    @media (prefers-color-scheme: dark) { :root { --fg: #e5e7eb; --muted: #9ca3af; --line: #374151; --bg: #111827; --panel: #1f2937;
      --accent: #60a5fa; --bad: #f87171; --good: #4ade80; --warn: #fbbf24; } }
    * { box-sizing: border-box; }
    body { margin: 0; font: 14px/1.4 system-ui, sans-serif; color: var(--fg); background: var(--bg); }
    header { display: flex; flex-wrap: wrap; gap: 8px; align-items: center; padding: 10px 16px; border-bottom: 1px solid var(--line); }
    h1 { font-size: 18px; margin: 0; } h1 span { font-weight: normal; color: var(--muted); font-size: 14px; word-break: break-all; }
    h2 { font-size: 15px; margin: 0 0 8px; }
    .spacer { flex: 1; }
    main { padding: 12px 16px; display: grid; gap: 12px; }
    .panel { background: var(--panel); border: 1px solid var(--line); border-radius: 8px; padding: 10px 12px; overflow-x: auto; }
    .totals { display: grid; grid-template-columns: repeat(auto-fit, minmax(120px, 1fr)); gap: 8px; }
    .total { background: var(--panel); border: 1px solid var(--line); border-radius: 8px; padding: 8px 10px; }
    .total b { display: block; font-size: 20px; } .total span { color: var(--muted); font-size: 12px; }
    table { width: 100%; border-collapse: collapse; }
    th, td { text-align: left; padding: 5px 6px; border-bottom: 1px solid var(--line); vertical-align: top; }
    th { font-size: 12px; color: var(--muted); font-weight: 600; }
    .n { text-align: right; font-variant-numeric: tabular-nums; }
    td.file { max-width: 28ch; overflow-wrap: anywhere; }
    td.progress, td.actions, td.machine { white-space: nowrap; }
    td.actions button + button { margin-left: 4px; }
    progress { width: 120px; height: 10px; vertical-align: middle; }
    .state { font-size: 12px; padding: 1px 6px; border-radius: 9px; border: 1px solid var(--line); white-space: nowrap; }
    .state.running, .state.finishing { color: var(--accent); border-color: var(--accent); }
    .state.done { color: var(--good); } .state.failed { color: var(--bad); border-color: var(--bad); }
    .state.waiting-for-space { color: var(--warn); }
    .muted { color: var(--muted); } .error { color: var(--bad); }
    .stale { color: var(--warn); }
    button { font: inherit; padding: 3px 9px; border-radius: 6px; border: 1px solid var(--line); background: var(--bg); color: var(--fg); cursor: pointer; }
    button:hover { border-color: var(--accent); }
    td.err { max-width: 36ch; color: var(--bad); cursor: pointer; overflow-wrap: anywhere; }
    td.note { max-width: 36ch; color: var(--muted); overflow-wrap: anywhere; }
    pre.log { white-space: pre-wrap; max-height: 320px; overflow: auto; margin: 0; font-size: 12px; }
    .badge { background: var(--warn); color: #fff; border-radius: 9px; padding: 1px 8px; font-size: 12px; }
    #login { padding: 10px 16px; border-bottom: 1px solid var(--line); }
    #chart { width: 100%; height: 90px; display: block; } #chart rect { fill: var(--accent); }
    .chart-scale, .chart-axis { color: var(--muted); font-size: 12px; } .chart-axis { display: flex; justify-content: space-between; }
    @media (max-width: 700px) { .wide { display: none; } progress { width: 70px; } main { padding: 8px; } td.file { max-width: 18ch; } }

    """

    static let script = """
    "use strict";
    const $ = (id) => document.getElementById(id);
    const openLogs = new Set();
    let limit = 200, timer = null, firstRender = true;

    function el(tag, text, cls) {
      const e = document.createElement(tag);
      if (text !== undefined && text !== null) e.textContent = String(text);
      if (cls) e.className = cls;
      return e;
    }
    function clock(s) {
      if (s === null || s === undefined || !isFinite(s)) return "-";
      s = Math.round(s);
      const h = Math.floor(s / 3600), m = Math.floor(s / 60) % 60, sec = s % 60;
      const two = (n) => String(n).padStart(2, "0");
      return h > 0 ? h + ":" + two(m) + ":" + two(sec) : m + ":" + two(sec);
    }
    const fps = (v) => (v === null || v === undefined) ? "-" : v.toFixed(1);

    async function api(path, options) {
      const response = await fetch(path, Object.assign({ credentials: "same-origin", cache: "no-store" }, options || {}));
      if (response.status === 401) { showLogin(); throw new Error("token needed"); }
      const body = response.status === 204 ? null : await response.json();
      if (!response.ok) throw new Error((body && body.error) || ("HTTP " + response.status));
      return body;
    }
    function post(path, body) {
      return api(path, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body || {}) });
    }

    function showLogin() { $("login").hidden = false; $("token").focus(); }

    function renderTotals(s) {
      const c = s.counts, box = $("totals");
      const items = [
        [(c.running || 0) + (c.finishing || 0), "running"], [(c.queued || 0) + (c["waiting-for-space"] || 0), "queued"],
        [c.failed || 0, "failed"], [s.doneToday, "done today"], [s.framesPerSecond.toFixed(1), "frames/s now"],
        s.secondsOfWorkLeft == null ? ["?", "work queued (no rate measured yet)"]
          : [(s.secondsOfWorkLeft / 3600).toFixed(1) + " h" + (s.unplannedJobs ? " + " + s.unplannedJobs + " unplanned" : ""), "work queued"],
        [s.workers + (s.staleWorkers ? " (+" + s.staleWorkers + " stale)" : ""), "workers"],
      ];
      box.replaceChildren(...items.map(([value, label]) => {
        const d = el("div", null, "total"); d.append(el("b", value), el("span", label)); return d;
      }));
      $("title").textContent = s.title;
      $("paused").hidden = !s.paused; $("pause").hidden = s.paused; $("resume").hidden = !s.paused;
      document.title = "upscale: " + ((c.running || 0) + (c.finishing || 0)) + " running, " + (c.queued || 0) + " queued";
    }

    function renderChart(s) {
      const svg = $("chart"), ns = "http://www.w3.org/2000/svg", points = s.throughput;
      const max = Math.max(1, ...points.map((p) => p.fps)), w = 480 / points.length;
      const nodes = points.map((p, i) => {
        const r = document.createElementNS(ns, "rect"), h = (p.fps / max) * 78;
        r.setAttribute("x", (i * w + 1).toFixed(1)); r.setAttribute("width", (w - 2).toFixed(1));
        r.setAttribute("y", (88 - h).toFixed(1)); r.setAttribute("height", h.toFixed(1));
        const t = document.createElementNS(ns, "title");
        t.textContent = new Date(p.start * 1000).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" }) + ": " + p.fps.toFixed(2) + " frames/s";
        r.append(t); return r;
      });
      $("chart-max").textContent = "top " + max.toFixed(1) + " frames/s";
      svg.replaceChildren(...nodes);
    }

    function renderWorkers(list) {
      const body = $("workers").tBodies[0];
      body.replaceChildren(...list.workers.map((w) => {
        const tr = el("tr", null, w.stale ? "stale" : "");
        tr.append(el("td", w.name), el("td", w.current || "idle"), el("td", fps(w.fps), "n"),
          el("td", Math.round(w.secondsAgo) + " s ago" + (w.stale ? " (stale)" : "")));
        return tr;
      }));
      $("no-workers").hidden = list.workers.length > 0;
    }

    function action(label, run) {
      const b = el("button", label);
      b.type = "button";
      b.addEventListener("click", async () => {
        b.disabled = true;
        try { await run(); await refresh(); } catch (e) { $("status").textContent = label + ": " + e.message; }
        b.disabled = false;
      });
      return b;
    }

    function renderJobs(page, summary) {
      const body = $("jobs").tBodies[0], rows = [];
      for (const job of page.jobs) {
        const tr = el("tr"); tr.dataset.job = job.id; tr.dataset.state = job.state;
        const file = el("td", job.file, "file"); file.title = job.input;
        const state = el("td"); state.append(el("span", job.state, "state " + job.state));
        const progress = el("td", null, "progress");
        if (job.progress != null) {
          const bar = el("progress"); bar.max = 1; bar.value = job.progress;
          bar.setAttribute("value", job.progress.toFixed(4));
          progress.append(bar, el("span", " " + Math.floor(job.progress * 100) + "%", "muted"));
        } else { progress.textContent = "-"; }
        const chunks = job.chunks > 1 ? job.chunksDone + "/" + job.chunks : "-";
        // The error's first line; for a job without one, what its output does not keep.
        const notes = (job.notes || []).join(" ");
        const err = el("td", job.error ? job.error.split("\\n")[0] : notes, job.error ? "err" : notes ? "note" : "");
        const actions = el("td", null, "actions");
        if (job.state === "failed" || job.state === "cancelled") actions.append(action("Retry", () => post("/api/jobs/" + job.id + "/retry")));
        if (["queued", "running", "waiting-for-space"].includes(job.state)) actions.append(action("Cancel", () => post("/api/jobs/" + job.id + "/cancel")));
        if (job.state === "queued" && job.priority <= summary.topPriority && (job.priority < summary.topPriority || summary.counts.queued > 1))
          actions.append(action("Run next", () => post("/api/jobs/" + job.id + "/priority", { priority: summary.topPriority + 1 })));
        tr.append(file, state, progress, el("td", fps(job.fps), "n"), el("td", clock(job.etaSeconds), "n"), el("td", chunks, "wide n"),
          el("td", job.machines.join(", ") || "-", "wide machine"), el("td", job.attempts, "wide n"), err, actions);
        rows.push(tr);
        if (job.error || job.attempts > 0) {
          err.addEventListener("click", () => { openLogs.has(job.id) ? openLogs.delete(job.id) : openLogs.add(job.id); refresh(); });
        }
        if (openLogs.has(job.id)) {
          const logRow = el("tr", null, "log-row"), cell = el("td"); cell.colSpan = 10;
          const pre = el("pre", "loading log…", "log"); cell.append(pre); logRow.append(cell); rows.push(logRow);
          api("/api/jobs/" + job.id + "/log").then((log) => { pre.textContent = log.text || "(empty log)"; })
            .catch((e) => { pre.textContent = e.message; });
        }
      }
      body.replaceChildren(...rows);
      $("job-count").textContent = page.total > page.jobs.length ? "(" + page.jobs.length + " of " + page.total + ")" : "(" + page.total + ")";
      $("more").hidden = page.total <= page.jobs.length;
    }

    async function refresh() {
      clearTimeout(timer);
      try {
        const [summary, page, workers] = await Promise.all([api("/api/summary"), api("/api/jobs?limit=" + limit), api("/api/workers")]);
        $("login").hidden = true;
        renderTotals(summary); renderChart(summary); renderWorkers(workers); renderJobs(page, summary);
        $("status").textContent = "updated " + new Date(summary.now * 1000).toLocaleTimeString();
        if (firstRender) { firstRender = false; document.documentElement.dataset.firstRender = Math.round(performance.now()); }
      } catch (e) {
        $("status").textContent = e.message;
      }
      timer = setTimeout(refresh, 2000);
    }

    document.addEventListener("DOMContentLoaded", () => {
      $("pause").addEventListener("click", () => post("/api/pause").then(refresh));
      $("resume").addEventListener("click", () => post("/api/resume").then(refresh));
      $("more").addEventListener("click", () => { limit += 200; refresh(); });
      $("login").addEventListener("submit", async (event) => {
        event.preventDefault();
        try { await post("/api/login", { token: $("token").value }); $("token").value = ""; $("login-error").textContent = ""; refresh(); }
        catch (e) { $("login-error").textContent = e.message; }
      });
      refresh();
    });

    """
}
