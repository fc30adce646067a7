// The Decoding page's step viewer (app/components/decoding_steps/__init__.py says what it is for). Two
// mounts run this module: the records mount gets the run's blob (data is a Uint8Array) and files it in a
// store shared by the page; the view mount gets the run's id and the page's step, layer and head, and
// draws the viewer from the store. Streamlit calls the default export on mount and whenever a mount's
// data changes; the state kept on the view's root element lets a rerun keep what the reader picked here.
// Every chart is SVG (the heads' overview a <canvas>), each drawn number on its element as a data-
// attribute, so a browser test reads back what is on screen.

const STORE = "__txvizDecodingSteps";  // run id -> { header, layers: Map(layer -> rows of every step) }
const KEPT_RUNS = 2;
const PICK_AFTER_MS = 250;  // the reader stopped scrubbing: then the page's step follows (a rerun)
const SVG = "http://www.w3.org/2000/svg";
const RAW = "#adb5bd", TEMPERED = "#74c0fc", SAMPLED = "#1971c2", CHOSEN = "#e8590c", CUT = "#c92a2a";
const SCALE = 65535;

function store() {
  if (!window[STORE]) window[STORE] = { runs: new Map(), listeners: new Set() };
  return window[STORE];
}

// The blob: "TXDS", the header's length (uint32 LE), the JSON header, then uint16 LE rows, step by step,
// layer by layer (of header.layers), head by head, each step's position long (payload.py writes it).
function fileBlob(bytes) {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const size = view.getUint32(4, true), start = 8 + size;
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, start)));
  const { runs } = store();
  const run = runs.get(header.run_id) || { header, layers: new Map() };
  runs.delete(header.run_id);
  runs.set(header.run_id, run);  // the newest last
  while (runs.size > KEPT_RUNS) runs.delete(runs.keys().next().value);
  if (header.layers.every((layer) => run.layers.has(layer))) return;  // filed already (a rerun's reference)
  const values = new Uint16Array(bytes.slice(start).buffer);  // a copy: the rows start on an even byte
  const heads = header.n_heads, sent = header.layers.length;
  let at = 0;
  const bases = header.steps.map((step) => { const base = at; at += sent * heads * step.position; return base; });
  header.layers.forEach((layer, index) => {
    run.layers.set(layer, (step, head) => {  // the weights of one head at one step, as a Uint16Array
      const n = header.steps[step].position, first = bases[step] + (index * heads + head) * n;
      return values.subarray(first, first + n);
    });
  });
  store().listeners.forEach((listener) => listener());
}

function node(name, attributes = {}, text = null) {
  const element = document.createElementNS(SVG, name);
  Object.entries(attributes).forEach(([key, value]) => element.setAttribute(key, String(value)));
  if (text !== null) element.textContent = text;
  return element;
}

function html(tag, className, text = null) {
  const element = document.createElement(tag);
  if (className) element.className = className;
  if (text !== null) element.textContent = text;
  return element;
}

// The y axis: a round step (1, 2, 2.5 or 5 × 10^k) giving about 4 grid lines up to the largest value.
function axisOf(largest) {
  const rough = (largest > 0 ? largest : 1) / 4, power = 10 ** Math.floor(Math.log10(rough));
  const step = power * [1, 2, 2.5, 5, 10].find((s) => s * power >= rough * 0.999);
  const digits = Math.max(0, -Math.floor(Math.log10(step) + 1e-9) + (String(step / power).includes(".") ? 1 : 0));
  return { top: step * Math.max(1, Math.ceil(largest / step - 1e-9)), step, digits };
}

// A chart's title cut to its width, measured in the page's own font once it is on screen (a guess from the
// number of characters cut too little of a bold 13 px title); the whole title stays in data-title.
function fitTitle(svg, width) {
  const title = svg.querySelector(".dec-title"), full = title.dataset.title, room = width - 4;
  if (title.getComputedTextLength() <= room) return;
  let low = 1, high = full.length - 1;
  while (low < high) {
    const middle = Math.ceil((low + high) / 2);
    title.textContent = `${full.slice(0, middle)}…`;
    if (title.getComputedTextLength() <= room) low = middle; else high = middle - 1;
  }
  title.textContent = `${full.slice(0, low)}…`;
}

const LABEL_CHARS = 14, LABEL_CHAR_PX = 6.2, LABEL_COS = Math.cos((40 * Math.PI) / 180);
const shortLabel = (text) => (text.length > LABEL_CHARS ? `${text.slice(0, LABEL_CHARS - 1)}…` : text);

// The left margin that keeps the first category labels (turned 40° and ending at their tick) inside the
// chart: a label reaches about its length × cos 40° to the left of its tick.
function labelMargin(labels, width, margin, every) {
  let left = margin;
  for (let pass = 0; pass < 2; pass++) {
    const band = Math.max(40, width - left - 8) / Math.max(1, labels.length);
    let most = margin;
    labels.forEach((text, i) => {
      if (i % every || i * band > 160) return;
      most = Math.max(most, Math.ceil(shortLabel(text).length * LABEL_CHAR_PX * LABEL_COS - (i + 0.5) * band + 2));
    });
    left = most;
  }
  return left;
}

const fmt = (value, digits) => Number(value).toFixed(digits);

// A bar chart's frame: title, y axis with 4 grid lines, category labels turned under the plot.
function frame(svg, { width, height, title, yTitle, largest, labels, showLabels, bottom }) {
  const every = Math.max(1, Math.ceil(11 / ((width - 54) / Math.max(1, labels.length))));  // labels 11 px apart at least
  const margin = { l: showLabels ? labelMargin(labels, width, 46, every) : 46, r: 8, t: 26, b: showLabels ? bottom : 26 };
  const { top, step, digits } = axisOf(largest);
  const plotW = Math.max(40, width - margin.l - margin.r), plotH = Math.max(40, height - margin.t - margin.b);
  const y = (v) => margin.t + plotH - (v / top) * plotH, band = plotW / Math.max(1, labels.length);
  const x = (i) => margin.l + i * band;
  svg.setAttribute("width", width);
  svg.setAttribute("height", height);
  const parts = [node("text", { x: 2, y: 16, class: "dec-title", "data-title": title }, title)];
  for (let v = 0; v <= top + step / 2; v += step) {
    parts.push(node("line", { x1: margin.l, x2: margin.l + plotW, y1: y(v), y2: y(v), class: "dec-grid" }),
               node("text", { x: margin.l - 4, y: y(v) + 3, class: "dec-tick", "text-anchor": "end" }, fmt(v, digits)));
  }
  parts.push(node("text", { x: 10, y: margin.t + plotH / 2, class: "dec-axis", transform: `rotate(-90 10 ${margin.t + plotH / 2})`,
                            "text-anchor": "middle" }, yTitle));
  if (!showLabels) {  // too many to read: their positions at a round step instead, so a reader still knows where a key is
    const spacing = axisOf(labels.length - 1).step;
    for (let i = 0; i < labels.length; i += spacing) {
      parts.push(node("text", { x: x(i) + band / 2, y: margin.t + plotH + 14, class: "dec-tick dec-position",
                                "text-anchor": "middle", "data-position": i }, String(i)));
    }
  }
  if (showLabels) {
    labels.forEach((text, i) => {  // every n-th one on a long row
      if (i % every) return;
      const cx = x(i) + band / 2, cy = margin.t + plotH + 6;
      parts.push(node("text", { x: cx, y: cy, class: "dec-tick dec-label", "text-anchor": "end", transform: `rotate(-40 ${cx} ${cy})` },
                      shortLabel(text)));
    });
  }
  return { parts, x, y, band, margin, plotW, plotH };
}

function samplerChart(svg, run, stepIndex, width, onBranch) {
  const { header } = run, step = header.steps[stepIndex], candidates = step.candidates;
  const series = [["raw", "raw softmax", RAW, "prob"]]
    .concat(header.greedy ? [] : [["tempered", "after temperature", TEMPERED, "prob_tempered"]])
    .concat([["sampled", "sampled from (cut, renormalised)", SAMPLED, "prob_sampled"]]);
  const largest = Math.max(...candidates.flatMap((c) => series.map(([, , , field]) => c[field])));
  const labels = candidates.map((c) => c.label);
  const f = frame(svg, { width, height: 300, title: `Top ${candidates.length} next tokens (${header.sampling})`,
                         yTitle: "probability", largest, labels, showLabels: true, bottom: 64 });
  const chosen = candidates.findIndex((c) => c.id === step.token.id), kept = candidates.filter((c) => c.prob_sampled > 0).length;
  const barW = (f.band * 0.8) / series.length;
  candidates.forEach((c, i) => {
    series.forEach(([name, title, color, field], s) => {
      const value = c[field], y = f.y(value);
      const bar = node("rect", { x: f.x(i) + f.band * 0.1 + s * barW, y, width: Math.max(1, barW - 1), height: f.y(0) - y,
                                 fill: color, class: "dec-bar", "data-series": name, "data-index": i, "data-token": c.id,
                                 "data-value": value });
      bar.append(node("title", {}, `${c.label} (rank ${c.rank}): ${title} ${fmt(value, 4)}`));
      f.parts.push(bar);
    });
    if (c.id !== step.token.id) {  // a click on another candidate continues a branch from it
      const target = node("rect", { x: f.x(i), y: f.margin.t, width: f.band, height: f.plotH, class: "dec-candidate",
                                    "data-token": c.id, "data-index": i });
      target.append(node("title", {}, `${c.label}: click to continue a branch with it from step ${stepIndex}`));
      target.addEventListener("click", () => onBranch(stepIndex, c.id));
      f.parts.push(target);
    }
  });
  if (kept > 0 && kept < candidates.length) {
    const x = f.x(kept);
    f.parts.push(node("line", { x1: x, x2: x, y1: f.margin.t, y2: f.margin.t + f.plotH, stroke: CUT, "stroke-width": 2,
                                "stroke-dasharray": "6 4", class: "dec-cut", "data-kept": kept }));
  }
  if (chosen >= 0) {
    f.parts.push(node("rect", { x: f.x(chosen) + f.band * 0.02, y: f.margin.t, width: f.band * 0.96, height: f.plotH,
                                fill: "none", stroke: CHOSEN, "stroke-width": 2, class: "dec-chosen", "data-index": chosen,
                                "data-token": step.token.id }));
  }
  f.parts.push(legend(series.map(([, title, color]) => [title, color]), f.margin.l, 300 - 4));
  svg.replaceChildren(...f.parts);
  fitTitle(svg, width);
  svg.dataset.step = String(stepIndex);
}

function legend(entries, x0, y) {
  const group = node("g", { class: "dec-legend" });
  let x = x0;
  entries.forEach(([text, color]) => {
    group.append(node("rect", { x, y: y - 9, width: 10, height: 10, fill: color }),
                 node("text", { x: x + 14, y, class: "dec-tick" }, text));
    x += 20 + text.length * 6;
  });
  return group;
}

function rowChart(svg, run, rows, stepIndex, layer, head, width) {
  const { header } = run, step = header.steps[stepIndex], window_ = header.windows[layer], query = step.query_position;
  const labels = header.labels.slice(0, step.position), weights = Array.from(rows, (q) => q / SCALE);
  const largest = Math.max(...weights, 1e-6);
  const kind = window_ === null ? "full attention" : `sliding window of ${window_}`;
  const f = frame(svg, { width, height: 260, yTitle: "weight", largest, labels, showLabels: labels.length <= 80, bottom: 60,
                         title: `Layer ${layer}, head ${head} (${kind}): query ${query} over ${step.position} keys` });
  if (window_ !== null && query - window_ >= 0) {  // keys k with query − k ≥ window are outside it
    const cut = f.x(query - window_ + 1);
    f.parts.push(node("rect", { x: f.margin.l, y: f.margin.t, width: cut - f.margin.l, height: f.plotH, fill: header.masked_color,
                                opacity: 0.5, class: "dec-window", "data-cut": query - window_ + 0.5 }),
                 node("line", { x1: cut, x2: cut, y1: f.margin.t, y2: f.margin.t + f.plotH, stroke: CUT, "stroke-width": 2,
                                "stroke-dasharray": "6 4" }));
  }
  weights.forEach((w, k) => {
    const y = f.y(w), bar = node("rect", { x: f.x(k) + f.band * 0.1, y, width: Math.max(0.5, f.band * 0.8), height: f.y(0) - y,
                                           fill: SAMPLED, class: "dec-weight", "data-key": k, "data-value": w });
    bar.append(node("title", {}, `${k} ${labels[k]}: ${fmt(w, 4)}`));
    f.parts.push(bar);
  });
  svg.replaceChildren(...f.parts);
  fitTitle(svg, width);
  Object.assign(svg.dataset, { step: String(stepIndex), layer: String(layer), head: String(head) });
}

function kvChart(svg, run, stepIndex, width) {
  const { header } = run, step = header.steps[stepIndex], kib = step.kv.map((b) => b / 1024);
  const formula = step.formula.map((b) => b / 1024), labels = kib.map((_, l) => String(l));
  const f = frame(svg, { width, height: 220, yTitle: "KiB", largest: Math.max(...kib, ...formula), labels,
                         showLabels: true, bottom: 40, title: `KV cache per layer: the ${step.position} tokens before this one` });
  kib.forEach((value, l) => {
    const y = f.y(value), bar = node("rect", { x: f.x(l) + f.band * 0.15, y, width: f.band * 0.7, height: f.y(0) - y, fill: TEMPERED,
                                               class: "dec-kv", "data-layer": l, "data-bytes": step.kv[l] });
    bar.append(node("title", {}, `layer ${l}: ${fmt(value, 1)} KiB measured, ${fmt(formula[l], 1)} KiB by the formula`));
    const fy = f.y(formula[l]);
    f.parts.push(bar, node("line", { x1: f.x(l) + f.band * 0.05, x2: f.x(l) + f.band * 0.95, y1: fy, y2: fy, stroke: CHOSEN,
                                     "stroke-width": 3, class: "dec-formula", "data-layer": l, "data-bytes": step.formula[l] }));
  });
  f.parts.push(legend([["measured (the cache's tensors)", TEMPERED], ["formula", CHOSEN]], f.margin.l, 220 - 4));
  svg.replaceChildren(...f.parts);
  fitTitle(svg, width);
  svg.dataset.step = String(stepIndex);
}

// Every head's row of the layer as a heatmap on a canvas (one ImageData scaled up), the chosen head ringed.
function headsChart(box, run, rowsOf, stepIndex, layer, head, width) {
  const { header } = run, heads = header.n_heads, n = header.steps[stepIndex].position;
  const ramp = box.txvizRamp || (box.txvizRamp = rampOf(header.colorscale));
  const left = 52, top = 4, cell = 22,  // top: the title is its own element above the canvas
    height = top + cell * heads + 8, plotW = Math.max(40, width - left - 8);
  const canvas = box.querySelector("canvas"), title = box.querySelector(".dec-heads-title");
  title.textContent = `Every head of layer ${layer}`;
  const ratio = window.devicePixelRatio || 1;
  canvas.width = Math.round(width * ratio);
  canvas.height = Math.round(height * ratio);
  canvas.style.width = `${width}px`;
  canvas.style.height = `${height}px`;
  const ctx = canvas.getContext("2d");
  ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  ctx.clearRect(0, 0, width, height);
  let most = 1e-6;
  const rows = Array.from({ length: heads }, (_, h) => rowsOf(stepIndex, h));
  rows.forEach((row) => row.forEach((q) => { if (q > most) most = q; }));
  const image = new ImageData(n, heads);
  rows.forEach((row, h) => row.forEach((q, k) => {
    const c = Math.min(255, Math.round((q / most) * 255)) * 3, at = (h * n + k) * 4;
    image.data[at] = ramp[c]; image.data[at + 1] = ramp[c + 1]; image.data[at + 2] = ramp[c + 2]; image.data[at + 3] = 255;
  }));
  const small = box.txvizSmall || (box.txvizSmall = document.createElement("canvas"));
  small.width = n;
  small.height = heads;
  small.getContext("2d").putImageData(image, 0, 0);
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(small, left, top, plotW, cell * heads);
  ctx.font = "11px system-ui, sans-serif";
  ctx.fillStyle = "#495057";
  ctx.textAlign = "right";
  ctx.textBaseline = "middle";
  for (let h = 0; h < heads; h++) ctx.fillText(`head ${h}`, left - 4, top + cell * (h + 0.5));
  ctx.strokeStyle = CHOSEN;
  ctx.lineWidth = 2;
  ctx.strokeRect(left, top + cell * head, plotW, cell);
  Object.assign(canvas.dataset, { step: String(stepIndex), layer: String(layer), head: String(head), most: String(most / SCALE),
                                  rowsTop: String(top) });
  canvas.txvizCells = { left, top, cell, plotW, n, rows, labels: header.labels };
}

function headsHover(box, event) {
  const canvas = box.querySelector("canvas"), cells = canvas.txvizCells, tip = box.querySelector(".dec-hover");
  if (!cells) return;
  const rect = canvas.getBoundingClientRect(), x = event.clientX - rect.left, y = event.clientY - rect.top;
  const h = Math.floor((y - cells.top) / cells.cell), k = Math.floor(((x - cells.left) / cells.plotW) * cells.n);
  if (h < 0 || h >= cells.rows.length || k < 0 || k >= cells.n) { tip.hidden = true; return; }
  tip.textContent = `head ${h} → ${k} ${cells.labels[k]}: ${fmt(cells.rows[h][k] / SCALE, 4)}`;
  tip.hidden = false;
  tip.style.left = `${x + 12}px`;
  tip.style.top = `${y + 12}px`;
}

const MIB = 2 ** 20;
// bytes as MiB from 1 MiB up, else KiB: a zoo model's cache is tens of KiB, which read "0.03 MiB"
const sized = (bytes) => (bytes >= MIB ? `${fmt(bytes / MIB, 2)} MiB` : `${fmt(bytes / 1024, 1)} KiB`);
const MIN_COLUMN = 320, COLUMN_GAP = 24;  // px: a chart narrower than this crowds its labels

function facts(root, run, rows, stepIndex, layer, head) {
  const { header } = run, step = header.steps[stepIndex], token = step.token;
  const [drawn, attention, cache, time] = root.querySelectorAll(".dec-facts p");
  drawn.innerHTML = "";
  drawn.append(html("b", "", `${step.forced ? "chosen by the branch" : "drawn"}: `), html("code", "", token.label),
               ` — rank `, html("b", "", String(token.rank)), `, probability `, html("b", "", fmt(token.prob, 3)),
               ` raw, `, html("b", "", fmt(token.prob_sampled, 3)), ` in the distribution it was drawn from. The sampler kept `,
               html("b", "", step.kept.toLocaleString("en")), ` of ${header.vocab_size.toLocaleString("en")} tokens`
               + (step.kept >= step.candidates.length ? "." : " (the dashed line: the cut)."));
  drawn.dataset.rank = String(token.rank);
  drawn.dataset.prob = String(token.prob);
  let strongest = 0, sum = 0;
  rows.forEach((q, k) => { sum += q; if (q > rows[strongest]) strongest = k; });
  // each weight is held to the nearest 1/SCALE, so the sum of n of them is known to n / (2 SCALE) only: a
  // long row reads 1.0003 from the rounding alone, and a fourth decimal would claim more than the data holds
  const within = rows.length / (2 * SCALE);
  attention.textContent = `Head ${head} looks most at position ${strongest} (${JSON.stringify(header.labels[strongest])}, weight `
    + `${fmt(rows[strongest] / SCALE, 2)}); its row sums to ${fmt(sum / SCALE, 3)} (± ${Number(within.toPrecision(1))}, `
    + `the rounding of its ${rows.length.toLocaleString("en")} weights, each held in steps of 1/${SCALE}).`;
  Object.assign(attention.dataset, { sum: String(sum / SCALE), within: String(within), keys: String(rows.length) });
  const measured = step.kv.reduce((a, b) => a + b, 0), formula = step.formula.reduce((a, b) => a + b, 0);
  const difference = Math.max(...step.kv.map((m, l) => Math.abs(m - step.formula[l])));
  const windows = header.windows.filter((w) => w !== null);
  cache.innerHTML = "";
  cache.append(html("b", "", `KV cache: ${sized(measured)}`), ` in all; the formula 2 × H_kv × d_head × tokens × `
    + `${header.element_bytes} B per layer gives ${sized(formula)} (largest difference ${difference.toLocaleString("en")} B).`
    + (windows.length ? ` Sliding layers keep at most ${Math.min(...windows)} tokens.` : ""));
  cache.dataset.bytes = String(measured);
  time.innerHTML = "";
  time.append(`This step ran ${stepIndex === 0 ? "the whole prompt, once" : "one token against the cache"}: `,
              html("b", "", `${fmt(step.seconds * 1000, 0)} ms`), ".");
}

function build(parentElement) {
  const root = html("div", "txviz-dec-steps");
  root.tabIndex = 0;
  root.setAttribute("aria-label", "The run's steps; left and right arrow keys move through them");
  root.innerHTML = '<div class="dec-tokens" role="toolbar" aria-label="Generated tokens"></div>'
    + '<div class="dec-controls"><label class="dec-step">Step <input type="range" min="0" step="1"> <output></output></label>'
    + '<label>Layer <select class="dec-layer"></select></label><label>Head <select class="dec-head"></select></label></div>'
    + '<h3 class="dec-heading"></h3><p class="dec-note" hidden></p>'
    + '<div class="dec-charts"><div class="dec-column"><svg class="dec-sampler"></svg><svg class="dec-row"></svg></div>'
    + '<div class="dec-column"><svg class="dec-kv-chart"></svg><div class="dec-heads"><div class="dec-heads-title"></div>'
    + '<canvas></canvas><div class="dec-hover" hidden></div></div></div></div>'
    + '<div class="dec-facts"><p class="dec-drawn"></p><p class="dec-attention"></p><p class="dec-cache"></p><p class="dec-time"></p></div>';
  parentElement.appendChild(root);
  root.txviz = { runId: null, step: 0, layer: 0, head: 0, serverView: null, sent: [], paints: 0, startedAt: null };
  const heads = root.querySelector(".dec-heads");
  heads.addEventListener("mousemove", (event) => headsHover(heads, event));
  heads.addEventListener("mouseleave", () => { heads.querySelector(".dec-hover").hidden = true; });
  new ResizeObserver(() => { if (root.clientWidth !== root.txvizWidth && root.txvizData) paint(root); }).observe(root);
  return root;
}

function controls(root, run) {
  const { header } = run, state = root.txviz, tokens = root.querySelector(".dec-tokens");
  if (tokens.dataset.run !== header.run_id) {
    const n = header.steps.length;
    tokens.replaceChildren(...header.steps.map((step, i) => {
      const button = html("button", "dec-pill");
      button.append(html("span", "", header.labels[header.n_prompt + i]), " ", html("span", "dec-index", String(i)));
      button.dataset.step = String(i);
      button.addEventListener("click", (event) => choose(root, { step: i }, event));
      return button;
    }));
    tokens.dataset.run = header.run_id;
    const slider = root.querySelector(".dec-step input");
    slider.max = String(n - 1);
    root.querySelector(".dec-step").hidden = n < 2;
    const options = (select, count, name) => select.replaceChildren(...Array.from({ length: count }, (_, i) => {
      const option = html("option", "", `${name} ${i}`);
      option.value = String(i);
      return option;
    }));
    options(root.querySelector(".dec-layer"), header.n_layers, "layer");
    options(root.querySelector(".dec-head"), header.n_heads, "head");
  }
  tokens.querySelectorAll("button").forEach((button, i) => button.setAttribute("aria-pressed", String(i === state.step)));
  root.querySelector(".dec-step input").value = String(state.step);
  root.querySelector(".dec-step output").textContent = String(state.step);
  root.querySelector(".dec-layer").value = String(state.layer);
  root.querySelector(".dec-head").value = String(state.head);
}

// A scrub, or a layer or head picked here: paint it at once, then let the page follow.
function choose(root, change, event) {
  const state = root.txviz, data = root.txvizData;
  const next = { step: state.step, layer: state.layer, head: state.head, ...change };
  const n = store().runs.get(data.run_id)?.header.steps.length ?? 1;
  if (next.step < 0 || next.step >= n || (next.step === state.step && next.layer === state.layer && next.head === state.head)) return;
  state.startedAt = event && event.timeStamp ? event.timeStamp : performance.now();
  Object.assign(state, next);
  paint(root);
  schedulePick(root, !layerHere(root, next.layer));
}

function layerHere(root, layer) {
  const run = store().runs.get(root.txvizData.run_id);
  return Boolean(run && run.layers.has(layer));
}

// Paint the reader's step, layer and head when the browser has them; otherwise wait (a blob is on its way).
function paint(root) {
  const data = root.txvizData, state = root.txviz, run = store().runs.get(data.run_id);
  if (!run) { root.dataset.waiting = "run"; return; }
  controls(root, run);
  const rowsOf = run.layers.get(state.layer);
  if (!rowsOf) { root.dataset.waiting = `layer ${state.layer}`; note(root, run, true); return; }
  delete root.dataset.waiting;
  note(root, run, false);
  // two columns of charts side by side where both fit, else one above the other at the viewer's width
  const { step, layer, head } = state, width = root.clientWidth || 900, stacked = width < 2 * MIN_COLUMN + COLUMN_GAP;
  const column = stacked ? width : Math.floor((width - COLUMN_GAP) / 2);
  root.classList.toggle("dec-stacked", stacked);
  const shown = `${data.run_id}:${step}:${layer}:${head}:${width}`;
  if (shown === root.txvizShown) return;  // a rerun's echo of what is on screen: nothing to redraw
  root.txvizShown = shown;
  root.txvizWidth = root.clientWidth;
  const info = run.header.steps[step];
  root.querySelector(".dec-heading").textContent = `Step ${step}: the token at position ${info.position}`;
  const rows = rowsOf(step, head);
  samplerChart(root.querySelector(".dec-sampler"), run, step, column, (s, token) => root.txvizBranch({ step: s, token }));
  rowChart(root.querySelector(".dec-row"), run, rows, step, layer, head, column);
  kvChart(root.querySelector(".dec-kv-chart"), run, step, column);
  headsChart(root.querySelector(".dec-heads"), run, rowsOf, step, layer, head, column);
  facts(root, run, rows, step, layer, head);
  const startedAt = state.startedAt;
  state.startedAt = null;
  requestAnimationFrame(() => setTimeout(() => {  // after the frame: what a test or the latency probe waits for
    state.paints += 1;
    if (startedAt !== null) root.dataset.paintMs = (performance.now() - startedAt).toFixed(1);
    Object.assign(root.dataset, { step: String(step), layer: String(layer), head: String(head),
                                  painted: `${step}:${layer}:${head}:${state.paints}` });
  }, 0));
}

function note(root, run, waiting) {
  // the layers filed so far for this run (the first blob's, and each one a layer change brought since)
  const held = [...run.layers.keys()].sort((a, b) => a - b), every = held.length === run.header.n_layers;
  const element = root.querySelector(".dec-note");
  element.hidden = every && !waiting;
  element.dataset.held = held.join(",");
  element.textContent = every ? "" : `This run's attention rows are too many to send every layer at once: the browser `
    + `holds layer${held.length > 1 ? "s" : ""} ${held.join(", ")}; another layer comes from the server (a moment)`
    + (waiting ? ` — layer ${root.txviz.layer} is on its way.` : ".");
}

function pageChoice(root) {
  const { sent } = root.txviz, data = root.txvizData;
  return sent.length ? sent[sent.length - 1] : `${data.step}:${data.layer}:${data.head}`;
}

// Once the reader has stopped (at once for a layer the browser lacks), send the step, layer and head.
function schedulePick(root, now) {
  clearTimeout(root.txvizPickTimer);
  root.txvizPickTimer = setTimeout(() => {
    const state = root.txviz, choice = `${state.step}:${state.layer}:${state.head}`;
    if (!root.isConnected || choice === pageChoice(root)) return;
    state.sent.push(choice);
    root.dataset.picks = String(Number(root.dataset.picks || 0) + 1);
    root.txvizPick({ step: state.step, layer: state.layer, head: state.head });
  }, now ? 0 : PICK_AFTER_MS);
}

function mountView(root, data, setTriggerValue) {
  const state = root.txviz, serverView = `${data.run_id}:${data.step}:${data.layer}:${data.head}`;
  if (serverView !== state.serverView) {
    const sameRun = state.runId === data.run_id, followed = sameRun ? state.sent.indexOf(`${data.step}:${data.layer}:${data.head}`) : -1;
    if (followed >= 0) {
      state.sent.splice(0, followed + 1);  // the page caught up with a pick sent here: keep the reader's own
    } else {
      Object.assign(state, { runId: data.run_id, step: data.step, layer: data.layer, head: data.head, sent: [] });
    }
    state.serverView = serverView;
  }
  root.txvizData = data;
  root.txvizPick = (value) => setTriggerValue("pick", value);
  root.txvizBranch = (value) => setTriggerValue("branch", value);
  if (!root.txvizKeys) {
    root.txvizKeys = true;
    root.addEventListener("keydown", (event) => {
      const move = { ArrowLeft: -1, ArrowRight: 1 }[event.key];
      if (move === undefined || event.target.tagName === "SELECT") return;
      event.preventDefault();
      choose(root, { step: root.txviz.step + move }, event);
    });
    root.querySelector(".dec-step input").addEventListener("input", (event) => choose(root, { step: Number(event.target.value) }, event));
    root.querySelector(".dec-layer").addEventListener("change", (event) => choose(root, { layer: Number(event.target.value) }, event));
    root.querySelector(".dec-head").addEventListener("change", (event) => choose(root, { head: Number(event.target.value) }, event));
    const listener = () => { if (!root.isConnected) { store().listeners.delete(listener); return; } if (root.dataset.waiting !== undefined) paint(root); };
    store().listeners.add(listener);
  }
  paint(root);
}

export default function (component) {
  const { data, parentElement, setTriggerValue } = component;
  if (data instanceof Uint8Array) {  // the records mount: it files the run's blob
    fileBlob(data);
    return;
  }
  const root = parentElement.querySelector(".txviz-dec-steps") || build(parentElement);
  mountView(root, data, setTriggerValue);
}
