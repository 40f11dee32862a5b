/* toolwild report: headline, figures (plotly specs) and the trajectory viewer. Vanilla JS, no network.
 * All data comes from the JSON blocks of the page. Text is always inserted as text (never as HTML): a model's
 * output or an observation can hold anything. The task list renders in chunks as it scrolls into view, and a task's
 * details only when it is opened, so a report of 1,024 tasks stays quick. */
(function () {
  "use strict";
  var CHUNK = 60;

  function data(id) {
    return JSON.parse(document.getElementById(id).textContent);
  }

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    if (attrs) {
      Object.keys(attrs).forEach(function (k) {
        if (k === "text") node.textContent = attrs[k];
        else if (k === "cls") node.className = attrs[k];
        else node.setAttribute(k, attrs[k]);
      });
    }
    (children || []).forEach(function (c) {
      if (c !== null && c !== undefined) node.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
    });
    return node;
  }

  function pct(x) {
    return x === null || x === undefined ? "n/a" : (x * 100).toFixed(1) + "%";
  }

  function json(value) {
    return typeof value === "string" ? value : JSON.stringify(value);
  }

  /* ---------- header and headline ---------- */

  function header(meta) {
    var badges = el("div", { cls: "badges" }, [
      el("span", { cls: "badge mode", title: "wtb = the published scorer; strict = its defects fixed" }, [
        "mode ",
        el("b", { text: meta.mode }),
      ]),
      el("span", { cls: "badge history", title: "wtb = earlier tasks shown as gold; free = the agent's own history" }, [
        "history ",
        el("b", { text: meta.history }),
      ]),
      el("span", { cls: "badge" }, ["model ", el("b", { text: meta.model })]),
      el("span", { cls: "badge" }, ["agent ", el("b", { text: meta.agent })]),
    ]);
    var notes = [];
    if (!meta.figures_complete) {
      var reasons = meta.incomplete && meta.incomplete.length ? meta.incomplete : ["Harness errors: the figures are incomplete."];
      reasons.forEach(function (r) { notes.push(el("p", { cls: "warn incomplete", text: r })); });
    }
    (meta.notes || []).forEach(function (n) { notes.push(el("p", { cls: "warn note", text: n })); });
    if (meta.missing_sessions && meta.missing_sessions.length)
      notes.push(el("details", { cls: "missing", id: "missing-sessions" }, [
        el("summary", { text: meta.missing_sessions.length + " session(s) without a result, counted as failed" }),
        el("p", { cls: "dim", text: meta.missing_sessions.join(", ") }),
      ]));
    if (meta.excluded_sessions)
      notes.push(el("p", { cls: "warn", text: meta.excluded_sessions + " session(s) left out (provider or harness errors)." }));
    if (meta.trials > 1)
      notes.push(el("p", { cls: "dim", text: meta.trials + " trials per session: the figures pool every trial; the tasks below are trial 0's (toolwild show --trial T shows another)." }));
    if (meta.forks)
      notes.push(el("p", { cls: "dim", text: "Forked run (" + meta.forks + " forks, one per task boundary): the headline, the paper's figures and the tasks below are fork 0's, the free run's; the forked table and figure compare each task forced (gold history) and free (toolwild show --fork I shows fork I)." }));
    return el("header", null, [
      el("h1", { text: meta.title }),
      badges,
      el("p", { cls: "dim", text: "suite " + meta.suite + " · from " + meta.source + " · " + meta.generated + " · toolwild " + meta.version }),
    ].concat(notes));
  }

  function headline(items) {
    return el(
      "section",
      { cls: "headline", id: "headline-cards" },
      items.map(function (h) {
        var value = h.key === "redundant_writes" ? String(h.correct) : pct(h.value);
        var ci = h.low !== null && h.low !== undefined ? "95% CI [" + pct(h.low) + ", " + pct(h.high) + "]" : "";
        var counts = h.total ? h.correct + "/" + h.total + " " + h.unit : "no " + h.unit;
        if (h.key === "redundant_writes") counts = h.total + " task(s)";
        return el("div", { cls: "card", "data-key": h.key }, [
          el("div", { cls: "label", text: h.label }),
          el("div", { cls: "value" + (value === "n/a" ? " na" : ""), text: value }),
          el("div", { cls: "counts", text: counts }),
          ci ? el("div", { cls: "ci", text: ci }) : null,
        ]);
      })
    );
  }

  /* A trial run: pass^k and pass@k for k = 1..K over tasks and sessions, each with its 95% interval. */
  function trialsTable(metrics) {
    var trials = (metrics.extensions || {}).trials;
    if (!trials) return null;
    var ci = trials.confidence_intervals || {};
    function cell(name, unit, k) {
      var value = trials[name][unit][k];
      var b = ((ci[name] || {})[unit] || {})[k];
      return el("td", { "data-cell": name + "/" + unit + "/" + k }, [
        pct(value),
        b && value !== null ? el("span", { cls: "dim", text: " [" + pct(b.low) + ", " + pct(b.high) + "]" }) : null,
      ]);
    }
    var head = el("tr", null, ["k", "pass^k tasks", "pass@k tasks", "pass^k sessions", "pass@k sessions"].map(function (h) {
      return el("th", { text: h });
    }));
    var rows = [head];
    for (var k = 1; k <= trials.k; k++) {
      var key = String(k);
      rows.push(el("tr", null, [
        el("td", { text: key }),
        cell("pass^k", "task", key),
        cell("pass@k", "task", key),
        cell("pass^k", "session", key),
        cell("pass@k", "session", key),
      ]));
    }
    var variance = trials.success_variance || {};
    var vb = ci.success_variance;
    var note = "Per-task success variance: " + (variance.value === null || variance.value === undefined ? "n/a" : variance.value.toFixed(4)) +
      (vb ? " [" + vb.low.toFixed(4) + ", " + vb.high.toFixed(4) + "]" : "") + " (" + variance.definition + "; " + variance.tasks + " tasks). " +
      trials.sessions + " sessions, " + trials.valid_runs + " valid runs; " + (trials.incomplete_sessions || []).length + " session(s) with lost trials.";
    return el("section", { cls: "trials", id: "trials-table" }, [
      el("h2", { text: "Trials: pass^k and pass@k (95% intervals, bootstrap over sessions)" }),
      el("table", null, rows),
      el("p", { cls: "dim", text: note }),
    ]);
  }

  /* A forked run: forced against free accuracy (and the gap) overall and per transition count, first divergence
   * and recovery, each with its 95% interval. */
  function forkedTable(metrics) {
    var forked = (metrics.extensions || {}).forked;
    if (!forked) return null;
    function share(leaf, value, part, whole) {
      value = value || "accuracy"; part = part || "correct_count"; whole = whole || "total_count";
      var b = leaf.low !== undefined ? " [" + pct(leaf.low) + ", " + pct(leaf.high) + "]" : "";
      return pct(leaf[value]) + " (" + leaf[part] + "/" + leaf[whole] + ")" + (leaf[value] === null ? "" : b);
    }
    function points(block) {
      if (block.gap === null || block.gap === undefined) return "n/a";
      function pt(x) { return (x >= 0 ? "+" : "") + (x * 100).toFixed(1); }
      return pt(block.gap) + " pt" + (block.low !== undefined ? " [" + pt(block.low) + ", " + pt(block.high) + "]" : "");
    }
    var rows = [el("tr", null, ["", "forced", "free", "gap (forced − free)"].map(function (h) { return el("th", { text: h }); }))];
    function row(key, name, block) {
      rows.push(el("tr", { "data-row": key }, [
        el("td", { text: name }),
        el("td", { text: share(block.forced) }),
        el("td", { text: share(block.free) }),
        el("td", { text: points(block) }),
      ]));
    }
    row("tasks", "tasks", forked.overall);
    row("sessions", "sessions", forked.overall.session);
    Object.keys(forked.gap_by_transitions).forEach(function (k) {
      row("t" + k, "tasks, sessions of " + k + " transition(s)", forked.gap_by_transitions[k]);
    });
    Object.keys(forked.gap_by_transitions_before).forEach(function (k) {
      row("b" + k, "tasks after " + k + " transition(s)", forked.gap_by_transitions_before[k]);
    });
    var first = forked.first_divergence;
    var where = Object.keys(first.by_task).map(function (j) { return "task " + (Number(j) + 1) + ": " + first.by_task[j]; }).join(", ");
    var divergence = "First divergence (the first task failed free but passed forced): " + first.diverged + " of " + first.sessions +
      " session(s)" + (first.low !== undefined ? " [" + pct(first.low) + ", " + pct(first.high) + "]" : "") +
      (where ? " · " + where : "") + " · " + first.after_own_failure + " after an own failed task.";
    var r = forked.recovery;
    var recovery = "Recovery (the next task correct after a failed one): free " + share(r.free, "rate", "recovered", "failures") +
      " · forced " + share(r.forced, "rate", "recovered", "failures") +
      " · after its own mistake " + share(r.after_own_mistake, "rate", "recovered", "failures") + ".";
    return el("section", { cls: "trials forked", id: "forked-table" }, [
      el("h2", { text: "Forked: forced against free (95% intervals, bootstrap over sessions)" }),
      el("p", { cls: "dim", text: forked.sessions + " sessions, " + forked.tasks + " tasks, " + forked.task_runs + " task-runs; " +
        (forked.incomplete_sessions || []).length + " session(s) left out (a fork lost)." }),
      el("table", null, rows),
      el("p", { id: "forked-divergence", text: divergence }),
      el("p", { id: "forked-recovery", text: recovery }),
    ]);
  }

  function charts(figures) {
    var section = el("section", { cls: "figures" });
    figures.forEach(function (f) {
      var div = el("div", { cls: "chart", id: "chart-" + f.key, "data-figure": f.key });
      section.appendChild(div);
    });
    return section;
  }

  function drawCharts(figures) {
    figures.forEach(function (f) {
      var div = document.getElementById("chart-" + f.key);
      window.Plotly.newPlot(div, f.spec.data, f.spec.layout, { displaylogo: false, responsive: true });
    });
  }

  /* ---------- the viewer ---------- */

  function unique(tasks, key) {
    var seen = {};
    tasks.forEach(function (t) {
      if (t[key] !== null && t[key] !== undefined) seen[t[key]] = true;
    });
    return Object.keys(seen).sort();
  }

  function select(id, label, options) {
    var s = el("select", { id: id }, [el("option", { value: "", text: "all" })]);
    options.forEach(function (o) {
      s.appendChild(el("option", { value: String(o[0]), text: o[1] }));
    });
    return el("label", null, [label + " ", s]);
  }

  function Viewer(tasks) {
    this.tasks = tasks;
    this.shown = [];
    this.rendered = 0;
    this.list = el("ol", { cls: "tasks", id: "task-list" });
    this.count = el("span", { id: "task-count" });
    this.sentinel = el("div", { cls: "sentinel", id: "list-sentinel" });
  }

  Viewer.prototype.element = function () {
    var t = this.tasks;
    var filters = el("div", { cls: "filters" }, [
      select("f-outcome", "outcome", [["correct", "passed"], ["error", "failed"], ["excluded", "excluded"]]),
      select("f-type", "task type", unique(t, "type").map(function (x) { return [x, x]; })),
      select("f-subtype", "subtype", unique(t, "subtype").map(function (x) { return [x, x]; })),
      select("f-class", "error class", unique(t, "cls").map(function (x) { return [x, x]; })),
      select("f-tr", "transitions", unique(t, "tr").map(function (x) { return [x, x]; })),
      this.count,
    ]);
    var self = this;
    filters.addEventListener("change", function () {
      self.filter();
    });
    return el("section", { cls: "viewer" }, [el("h2", { text: "Tasks" }), filters, this.list, this.sentinel]);
  };

  Viewer.prototype.value = function (id) {
    return document.getElementById(id).value;
  };

  Viewer.prototype.filter = function () {
    var o = this.value("f-outcome"), ty = this.value("f-type"), st = this.value("f-subtype");
    var c = this.value("f-class"), tr = this.value("f-tr");
    this.shown = this.tasks.filter(function (t) {
      return (!o || t.label === o) && (!ty || t.type === ty) && (!st || t.subtype === st) &&
        (!c || t.cls === c) && (!tr || String(t.tr) === tr);
    });
    this.count.textContent = this.shown.length + " of " + this.tasks.length + " tasks";
    this.list.textContent = "";
    this.rendered = 0;
    this.more();
  };

  /* Render the next chunk; the sentinel's observer calls this again while the list's end is in view. */
  Viewer.prototype.more = function () {
    var end = Math.min(this.shown.length, this.rendered + CHUNK);
    var frag = document.createDocumentFragment();
    for (var k = this.rendered; k < end; k++) frag.appendChild(this.row(this.shown[k]));
    this.list.appendChild(frag);
    this.rendered = end;
    this.list.setAttribute("data-rendered", String(end));
    this.sentinel.style.display = end < this.shown.length ? "block" : "none";
  };

  Viewer.prototype.watch = function () {
    var self = this;
    if (!("IntersectionObserver" in window)) {
      this.sentinel.textContent = "show more";
      this.sentinel.addEventListener("click", function () { self.more(); });
      return;
    }
    new IntersectionObserver(function (entries) {
      if (entries.some(function (e) { return e.isIntersecting; }) && self.rendered < self.shown.length) self.more();
    }, { rootMargin: "600px" }).observe(this.sentinel);
  };

  /* A task's link: #task=<session id, percent-encoded>/<n>, n counted from 1 as the row shows it ("task n/N"). */
  function taskHash(t) {
    return "#task=" + encodeURIComponent(t.s) + "/" + (t.i + 1);
  }

  /* Open one task from a link (compare.html's flips, a row's own link): #task=<session id>/<n>, n as the row shows
     it ("task n/N", from 1). The filters are cleared and chunks rendered until its row exists, so a link works
     wherever the task is; a link to a task the report lacks says so instead of doing nothing. */
  Viewer.prototype.reveal = function (hash) {
    var notice = document.getElementById("link-notice");
    if (notice) notice.parentNode.removeChild(notice);
    var m = /^#task=(.*)\/(\d+)$/.exec(hash || "");
    if (!m) return false;
    var sid, n = Number(m[2]);
    try { sid = decodeURIComponent(m[1]); } catch (e) { sid = m[1]; }
    var pos = this.tasks.findIndex(function (t) { return t.s === sid && t.i + 1 === n; });
    if (pos < 0) {
      var known = this.tasks.find(function (t) { return t.s === sid; });
      var why = known ? "session " + sid + " has tasks 1 to " + known.n + " (counted from 1, as each row shows them)" : "no session " + sid + " in this report";
      this.list.parentNode.insertBefore(
        el("p", { cls: "warn", id: "link-notice", text: "The link names task " + n + " of session " + sid + ": " + why + "." }),
        this.list
      );
      return false;
    }
    ["f-outcome", "f-type", "f-subtype", "f-class", "f-tr"].forEach(function (id) {
      document.getElementById(id).value = "";
    });
    this.filter();
    while (this.rendered <= pos && this.rendered < this.shown.length) this.more();
    var li = this.list.children[pos];
    if (!li.classList.contains("open")) li.querySelector(".summary").click();
    li.scrollIntoView({ block: "start" });
    return true;
  };

  var MARKS = { correct: "✓", error: "✗", excluded: "–" };

  Viewer.prototype.row = function (t) {
    var summary = el("div", { cls: "summary" }, [
      el("span", { cls: "mark " + t.label, text: MARKS[t.label] || "?" }),
      el("span", { cls: "sid", text: t.s }),
      el("a", { cls: "pos", href: taskHash(t), title: "link to this task", text: "task " + (t.i + 1) + "/" + t.n }),
      el("span", { cls: "tag", text: t.type }),
      el("span", { cls: "tag sub", text: t.subtype }),
      t.cls ? el("span", { cls: "tag cls", text: t.cls }) : null,
      el("span", { cls: "why", text: t.explanation }),
    ]);
    var li = el("li", { cls: "task " + t.label, "data-key": t.s + "#" + t.i, "data-label": t.label }, [summary]);
    summary.addEventListener("click", function (event) {
      if (event.target && event.target.classList && event.target.classList.contains("pos")) {
        /* the task's own link: put it in the address bar to copy, without a hash change (which would clear the
           filters to reveal the task), and open or close the row as a click on the row does */
        event.preventDefault();
        if (window.history && window.history.replaceState) window.history.replaceState(null, "", taskHash(t));
      }
      var open = li.querySelector(".detail");
      if (open) {
        li.removeChild(open);
        li.classList.remove("open");
      } else {
        li.appendChild(detail(t));
        li.classList.add("open");
      }
    });
    return li;
  };

  /* ---------- one task's details ---------- */

  function call(name, args) {
    return el("code", { cls: "call", text: name + "(" + json(args) + ")" });
  }

  function goldColumn(t) {
    var nodes = el("ol", { cls: "gold", start: "0" });
    t.gold.nodes.forEach(function (n) {
      var item = el("li", null, [
        el("span", { cls: "idx", text: "#" + n.idx + " " }),
        n.pseudo
          ? el("code", { cls: "call", text: n.name })
          : call(n.name, n.args),
        n.deps.length ? el("span", { cls: "deps", text: " after #" + n.deps.join(", #") }) : null,
      ]);
      if (n.user_input) item.appendChild(el("div", { cls: "reply", text: "user replies: " + n.user_input }));
      if (n.obs) item.appendChild(collapsible("observation", n.obs));
      nodes.appendChild(item);
    });
    var paths = el("ul", { cls: "paths" });
    t.gold.paths.forEach(function (p) {
      paths.appendChild(el("li", { text: p.map(function (b) { return "[" + b.map(function (x) { return "#" + x; }).join(" ") + "]"; }).join(" → ") }));
    });
    return el("div", { cls: "col" }, [
      el("h4", { text: "Gold DAG" }),
      nodes,
      el("h4", { text: "Optimal path" + (t.gold.paths.length > 1 ? "s" : "") + " (" + t.gold.min + " step" + (t.gold.min === 1 ? "" : "s") + ")" }),
      paths,
    ]);
  }

  function collapsible(title, text) {
    return el("details", { cls: "obs" }, [el("summary", { text: title }), el("pre", { text: text })]);
  }

  function stepItem(s, k) {
    var v = s.verdict;
    var mark = v ? (v.ok ? el("span", { cls: "mark correct", text: "✓" }) : el("span", { cls: "mark error", text: "✗" })) : null;
    var body;
    if (s.parse_error) body = el("span", { cls: "dim", text: "unparseable output: " + s.parse_error });
    else if (s.calls.length)
      body = el("span", null, ["calls "].concat(s.calls.map(function (c, i) { return el("span", null, [i ? "; " : "", call(c.name, c.args)]); })));
    else if (s.content) body = el("span", null, ["says ", el("q", { text: s.content })]);
    else body = el("span", { cls: "dim", text: "(empty reply)" });
    var li = el("li", { cls: "step" + (v && !v.ok ? " failed" : "") }, [el("b", { text: "step " + (k + 1) + " " }), body, " ", mark]);
    s.obs.forEach(function (o, i) {
      li.appendChild(collapsible("observation " + (i + 1), o));
    });
    if (s.reply) li.appendChild(el("div", { cls: "reply", text: "user replies: " + s.reply }));
    if (v && !v.ok) {
      li.appendChild(el("div", { cls: "explain", text: v.explanation || v.reason || "failed" }));
      if (v.expected.length) li.appendChild(el("div", { cls: "dim", text: "expected: " + v.expected.join(", ") }));
      v.checks.forEach(function (c) {
        if (c.result !== "correct") li.appendChild(el("div", { cls: "dim", text: c.name + ": " + c.result }));
      });
    }
    if (!v) li.appendChild(el("div", { cls: "dim", text: "not judged (the task had ended)" }));
    return li;
  }

  function modelColumn(t) {
    var steps = el("ol", { cls: "steps" });
    t.steps.forEach(function (s, k) { steps.appendChild(stepItem(s, k)); });
    var col = el("div", { cls: "col" }, [el("h4", { text: "Model" }), steps]);
    if (!t.steps.length) col.appendChild(el("p", { cls: "dim", text: t.session_error ? "no steps: " + t.session_error : "no steps" }));
    return col;
  }

  function verdictBox(t) {
    var words = t.label === "correct" ? "correct" : t.label === "excluded" ? "excluded (not a result of the agent)" : "FAILED";
    var parts = [words];
    if (t.cls) parts.push(t.cls);
    parts.push(t.used + " step(s), shortest " + t.min);
    if (t.label === "correct") parts.push(t.optimal ? "optimal" : "not optimal");
    var box = el("div", { cls: "verdict " + t.label }, [el("b", { text: "verdict: " }), parts.join(" · ")]);
    if (t.explanation) box.appendChild(el("div", { cls: "reason", text: t.explanation }));
    if (t.reason && t.reason !== t.explanation) box.appendChild(el("div", { cls: "dim", text: "published reason: " + t.reason }));
    if (t.failure) box.appendChild(el("div", { cls: "dim", text: "model failure (" + t.failure.kind + "): " + t.failure.message }));
    if (t.state_match !== null && t.state_match !== undefined)
      box.appendChild(el("div", { text: "state after the task: " + (t.state_match ? "as expected" : "differs from the expected state") }));
    if (t.redundant) box.appendChild(el("div", { text: "redundant writes: " + t.redundant }));
    if (t.state_diff && t.state_diff.length) box.appendChild(collapsible("state diff (" + t.state_diff.length + ")", JSON.stringify(t.state_diff, null, 2)));
    return box;
  }

  function detail(t) {
    return el("div", { cls: "detail" }, [
      el("div", { cls: "user" }, [el("b", { text: "user: " }), t.user]),
      el("div", { cls: "cols" }, [goldColumn(t), modelColumn(t)]),
      verdictBox(t),
    ]);
  }

  /* ---------- start ---------- */

  function start() {
    var meta = data("meta");
    var figures = data("figures");
    var app = document.getElementById("app");
    app.textContent = "";
    app.appendChild(header(meta));
    app.appendChild(headline(data("headline")));
    var trials = trialsTable(data("metrics"));
    if (trials) app.appendChild(trials);
    var forked = forkedTable(data("metrics"));
    if (forked) app.appendChild(forked);
    app.appendChild(charts(figures));
    var viewer = new Viewer(data("tasks"));
    app.appendChild(viewer.element());
    viewer.filter();
    viewer.watch();
    viewer.reveal(window.location.hash);
    window.addEventListener("hashchange", function () { viewer.reveal(window.location.hash); });
    window.toolwildReport = { listRenderedAt: performance.now(), viewer: viewer };
    document.body.setAttribute("data-list-ready", "1");
    drawCharts(figures);
    document.body.setAttribute("data-charts-ready", "1");
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
