// The head maps component (app/components/head_maps/__init__.py says what it is for). Two mounts run
// this module: the maps mount gets a binary blob (data is a Uint8Array) and files its layers in a store
// shared by the page; the view mount gets the page's layer and head and the figure, and paints from the
// store. Streamlit calls the default export on mount and again whenever a mount's data changes; the
// state kept on the view's root element lets a rerun keep the head and layer the reader picked here.
// The view is the page's one control of its layer and head: a switch paints at once, and once painted
// and the reader has stopped, the head goes back to the page ("pick"), whose other views follow it.
// The map itself is drawn by drawHeatmap (canvas_heatmap.js, concatenated before this file).

const STORE = "__txvizHeadMaps";  // prompt id -> Map(layer -> that layer's maps and texts)
const KEPT_PROMPTS = 2;  // the blobs of older prompts are let go
// Prefetch (a long prompt, one layer per blob): once the reader's layer is painted and the page is idle,
// ask the server for its neighbours (layer +1, −1, then +2, −2), one request in flight at a time, while
// this prompt's maps in the browser take under PREFETCH_BYTES, so ↑ / ↓ to a neighbour needs no rerun.
const PREFETCH_REACH = 2;
const PREFETCH_BYTES = 16 * 1024 * 1024;  // float16 bytes held per prompt: ~13 layers of SmolLM2 at 1024 tokens
const PREFETCH_AFTER_MS = 300;  // the reader stopped pressing keys: do not fetch the layers they pass through
const IN_FLIGHT_MS = 20000;  // a request whose layer never came (a rerun of the whole page took its place)
const PICK_AFTER_MS = 200;  // after the paint: a reader pressing ← / → does not rerun the page per head passed

function store() {
  if (!window[STORE]) window[STORE] = { prompts: new Map(), listeners: new Set() };
  return window[STORE];
}

function layerOf(promptId, layer) {
  const layers = store().prompts.get(promptId);
  return layers ? layers.get(layer) : undefined;
}

// float16 bits -> float32, through a table built once (65,536 entries)
let HALF = null;
function halfTable() {
  if (HALF) return HALF;
  HALF = new Float32Array(65536);
  for (let bits = 0; bits < 65536; bits++) {
    const sign = bits & 0x8000 ? -1 : 1, exponent = (bits >> 10) & 0x1f, fraction = bits & 0x3ff;
    HALF[bits] = exponent === 0 ? sign * 2 ** -14 * (fraction / 1024)
      : exponent === 31 ? (fraction ? NaN : sign * Infinity)
      : sign * 2 ** (exponent - 15) * (1 + fraction / 1024);
  }
  return HALF;
}

// The blob: "TXHM", the header's length (uint32 LE), the JSON header, then float16 LE maps
// (layers, heads, rows, cols), as app/figures/head_maps.py writes it.
function fileBlob(bytes) {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const size = view.getUint32(4, true), start = 8 + size;
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, start)));
  const { prompts } = store();
  const layers = prompts.get(header.prompt_id) || new Map();
  prompts.delete(header.prompt_id);
  prompts.set(header.prompt_id, layers);  // the newest last
  while (prompts.size > KEPT_PROMPTS) prompts.delete(prompts.keys().next().value);
  if (header.layers.every((layer) => layers.has(layer))) return;  // filed already (a rerun's reference)
  const [, heads, rows, cols] = header.shape, table = halfTable(), n = (bytes.byteLength - start) >> 1;
  const values = new Float32Array(n);
  for (let i = 0, at = start; i < n; i++, at += 2) values[i] = table[bytes[at] | (bytes[at + 1] << 8)];
  header.layers.forEach((layer, index) => {
    const first = index * heads * rows * cols;
    layers.set(layer, {
      rowsOf: (head) => Array.from({ length: rows }, (_, r) =>
        values.subarray(first + (head * rows + r) * cols, first + (head * rows + r + 1) * cols)),
      zmax: header.zmax[index], titles: header.titles[index], captions: header.captions[index],
      colorbarTitles: header.colorbar_titles ? header.colorbar_titles[index] : null,
      bytes: heads * rows * cols * 2,
    });
  });
  store().listeners.forEach((listener) => listener());
}

function build(parentElement) {
  const root = document.createElement("div");
  root.className = "txviz-head-maps";
  root.tabIndex = 0;
  root.setAttribute("aria-label", "Attention map; arrow keys: left and right switch heads, up and down layers");
  root.innerHTML = '<div class="txviz-head-bar" role="toolbar" aria-label="Head"></div>' +
    '<label class="txviz-layer">Layer <input type="range" min="0" step="1"> <output></output></label>' +
    '<div class="txviz-head-plot"></div><p class="txviz-head-caption"></p>';
  parentElement.appendChild(root);
  // sent: the picks sent to the page that its view has not shown yet, oldest first
  root.txviz = { layer: 0, head: 0, serverView: null, paints: 0, startedAt: null, asked: null, askedAt: 0, sent: [] };
  return root;
}

// What drawHeatmap needs for one head: the view's figure (labels, colour scale, hover, sizes) with this
// head's rows, colour cap and titles.
function specOf(data, maps, head) {
  const trace = data.figure.data[0], layout = data.figure.layout;
  const axisTitle = (axis) => { const title = (layout[axis] || {}).title; return (title && title.text) || title || ""; };
  return {
    rows: maps.rowsOf(head), zmax: maps.zmax[head], x: trace.x, y: trace.y, colorscale: trace.colorscale,
    background: layout.plot_bgcolor || "#d9d9d9", height: layout.height || 500, hovertemplate: trace.hovertemplate,
    title: maps.titles[head] + data.title_suffix, xTitle: axisTitle("xaxis"), yTitle: axisTitle("yaxis"),
    colorbarTitle: maps.colorbarTitles ? maps.colorbarTitles[head] : ((trace.colorbar || {}).title || {}).text || "",
  };
}

function showControls(root, data) {
  const { layer, head } = root.txviz;
  root.querySelectorAll(".txviz-head-bar button").forEach((button, h) => {
    button.setAttribute("aria-pressed", String(h === head));
    button.title = `Layer ${layer}, head ${h}`;
  });
  root.querySelector(".txviz-layer input").value = String(layer);
  root.querySelector(".txviz-layer output").textContent = String(layer);
}

// Paint the reader's layer and head if the browser has that layer; otherwise wait for it (its blob is
// on the way). startedAt: the performance.now() of the click or key that asked (null: a rerun).
function paint(root, data) {
  const state = root.txviz, { layer, head } = state, plot = root.querySelector(".txviz-head-plot");
  showControls(root, data);
  const maps = layerOf(data.prompt_id, layer);
  if (!maps) {
    root.dataset.waiting = String(layer);
    return Promise.resolve();
  }
  delete root.dataset.waiting;
  root.querySelector(".txviz-head-caption").textContent = maps.captions[head];
  const startedAt = state.startedAt;
  state.startedAt = null;
  drawHeatmap(plot, specOf(data, maps, head));
  return new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0)))  // after the frame
    .then(() => {
      state.paints += 1;  // what a test or the benchmark waits for: this head of this layer is on screen
      if (startedAt !== null) root.dataset.switchMs = (performance.now() - startedAt).toFixed(1);
      root.dataset.painted = `${layer}:${head}:${state.paints}`;
      root.dataset.layer = String(layer);
      root.dataset.head = String(head);
      schedulePrefetch(root);
    });
}

// The layers the browser holds for the view's prompt, on the root for tests and the benchmark.
function showLayersHeld(root) {
  const layers = store().prompts.get(root.txvizData.prompt_id);
  root.dataset.layers = layers ? [...layers.keys()].sort((a, b) => a - b).join(",") : "";
}

// Ask the server for a layer through the maps mount (a rerun of the maps' fragment alone); one request is
// in flight at a time.
function ask(root, layer) {
  const state = root.txviz, asker = store().ask;
  if (!asker) return;
  state.asked = layer;
  state.askedAt = performance.now();
  root.dataset.asked = String(layer);
  root.dataset.fetches = String(Number(root.dataset.fetches || 0) + 1);
  asker(layer);
}

// The head the page shows, or will once the picks on their way arrive.
function pageChoice(root) {
  const { sent } = root.txviz, data = root.txvizData;
  return sent.length ? sent[sent.length - 1] : `${data.layer}:${data.head}`;
}

// Once the reader has stopped on a head other than the page's, send it: the page's selection follows.
function schedulePick(root) {
  clearTimeout(root.txvizPickTimer);
  root.txvizPickTimer = setTimeout(() => {
    const state = root.txviz, choice = `${state.layer}:${state.head}`;
    if (!root.isConnected || choice === pageChoice(root)) return;
    state.sent.push(choice);
    root.dataset.picks = String(Number(root.dataset.picks || 0) + 1);
    root.txvizPick({ layer: state.layer, head: state.head });
  }, PICK_AFTER_MS);
}

// The next neighbour of the painted layer to fetch, or null: every layer sent at once, the reader's layer
// not painted yet, the neighbours all here, or the prompt's maps at the byte cap.
function nextToPrefetch(root) {
  const data = root.txvizData, { layer } = root.txviz, layers = store().prompts.get(data.prompt_id);
  if (data.all_layers || !layers || !layers.has(layer)) return null;
  let held = 0;
  layers.forEach((maps) => { held += maps.bytes; });
  if (held >= PREFETCH_BYTES) return null;
  for (let distance = 1; distance <= PREFETCH_REACH; distance++) {
    for (const near of [layer + distance, layer - distance]) {
      if (near >= 0 && near < data.n_layers && !layers.has(near)) return near;
    }
  }
  return null;
}

function appRunning() {  // the page's own script (a rerun the reader started) goes first
  const app = document.querySelector("[data-testid='stApp']");
  return app !== null && app.getAttribute("data-test-script-state") === "running";
}

// After a paint or a blob's arrival: when the reader and the page have been still a moment, and nothing
// is in flight, ask for the next neighbour (its arrival schedules the one after).
function schedulePrefetch(root) {
  const turn = cancelPrefetch(root);
  root.txvizPrefetchTimer = setTimeout(() => {
    const idle = window.requestIdleCallback || ((run) => setTimeout(run, 0));
    idle(() => { if (root.txvizPrefetchTurn === turn) prefetchNext(root); }, { timeout: 1000 });
  }, PREFETCH_AFTER_MS);
}

function cancelPrefetch(root) {  // a switch by the reader: nothing is asked for while it paints
  clearTimeout(root.txvizPrefetchTimer);
  root.txvizPrefetchTurn = (root.txvizPrefetchTurn || 0) + 1;
  return root.txvizPrefetchTurn;
}

function prefetchNext(root) {
  const state = root.txviz;
  if (!root.isConnected) return;  // the page moved on
  if (state.asked !== null && performance.now() - state.askedAt < IN_FLIGHT_MS) return;  // its arrival reschedules
  if (appRunning()) {
    schedulePrefetch(root);
    return;
  }
  const layer = nextToPrefetch(root);
  if (layer === null) {
    root.dataset.prefetch = "done";
    return;
  }
  delete root.dataset.prefetch;
  ask(root, layer);
}

function controls(root, data, show) {
  const bar = root.querySelector(".txviz-head-bar");
  if (bar.childElementCount !== data.n_heads) {
    bar.replaceChildren(...Array.from({ length: data.n_heads }, (_, h) => {
      const button = document.createElement("button");
      button.type = "button";
      button.textContent = `H${h}`;
      button.dataset.head = String(h);
      return button;
    }));
  }
  bar.querySelectorAll("button").forEach((button, h) => {
    button.onclick = (event) => show(root.txviz.layer, h, event);
  });
  const label = root.querySelector(".txviz-layer"), slider = label.querySelector("input");
  label.hidden = data.n_layers < 2;
  slider.max = String(data.n_layers - 1);
  slider.oninput = (event) => show(Number(slider.value), root.txviz.head, event);
}

function mountView(root, data, setTriggerValue) {
  const state = root.txviz;
  const serverView = `${data.prompt_id}:${data.layer}:${data.head}`;
  if (state.serverView !== serverView) {
    const samePrompt = state.serverView !== null && state.serverView.startsWith(`${data.prompt_id}:`);
    const followed = samePrompt ? state.sent.indexOf(`${data.layer}:${data.head}`) : -1;
    if (followed >= 0) {
      state.sent.splice(0, followed + 1);  // the page followed a pick sent here: the reader's latest stays
    } else {
      state.layer = data.layer;  // the page's head moved elsewhere (a grid click, a link, a new prompt)
      state.head = data.head;
      state.sent = [];
      clearTimeout(root.txvizPickTimer);
    }
    state.asked = null;  // a request under the old view is void: its reply may never come
    delete root.dataset.asked;
    delete root.dataset.prefetch;
  }
  state.serverView = serverView;
  root.txvizData = data;
  root.txvizPick = (cell) => setTriggerValue("pick", cell);
  const repaint = () => paint(root, root.txvizData);
  const show = (layer, head, event) => {
    if ((layer === state.layer && head === state.head) || head < 0 || head >= data.n_heads
        || layer < 0 || layer >= data.n_layers) return;
    cancelPrefetch(root);
    state.layer = layer;
    state.head = head;
    state.startedAt = event.timeStamp;
    // nothing goes to the server before the paint; a layer the browser lacks comes with the page's rerun
    repaint().then(() => schedulePick(root));
  };
  controls(root, data, show);
  root.onkeydown = (event) => {
    if (event.target.tagName === "INPUT") return;  // the layer slider handles its own keys
    const moves = { ArrowLeft: [state.layer, state.head - 1], ArrowRight: [state.layer, state.head + 1],
                    ArrowUp: [state.layer - 1, state.head], ArrowDown: [state.layer + 1, state.head] };
    const move = moves[event.key];
    if (!move) return;
    event.preventDefault();
    show(move[0], move[1], event);
  };
  if (root.txvizListener) store().listeners.delete(root.txvizListener);
  root.txvizListener = () => {  // a blob arrived: paint it if this map was waiting for it, else prefetch on
    const state = root.txviz;
    if (state.asked !== null && layerOf(root.txvizData.prompt_id, state.asked)) {
      state.asked = null;
      delete root.dataset.asked;
    }
    showLayersHeld(root);
    if (root.dataset.waiting !== undefined) repaint();
    else schedulePrefetch(root);
  };
  store().listeners.add(root.txvizListener);
  showLayersHeld(root);
  Promise.resolve().then(repaint).catch((error) => {
    root.querySelector(".txviz-head-caption").textContent =
      `The interactive map could not be drawn (${error.message}): open "The map as a plain chart" below.`;
  });
}

export default function (component) {
  const { data, parentElement, setTriggerValue } = component;
  if (data instanceof Uint8Array) {  // the maps mount: it files the blob and carries the requests for layers
    store().ask = (layer) => setTriggerValue("layer", layer);
    fileBlob(data);
    return;
  }
  const root = parentElement.querySelector(".txviz-head-maps") || build(parentElement);
  mountView(root, data, setTriggerValue);
}
