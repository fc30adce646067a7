// The head maps component (app/components/head_maps/__init__.py says what it is for).
// Streamlit calls the default export on mount and again whenever the data changes; the state kept on
// the root element lets a rerun with the same maps keep the head the reader picked here.

const PLOTLY = "__txvizPlotly";

function loadPlotly(url) {
  if (window.Plotly) return Promise.resolve(window.Plotly);
  if (!window[PLOTLY]) {
    window[PLOTLY] = new Promise((resolve, reject) => {
      const script = document.createElement("script");
      script.src = url;
      script.onload = () => resolve(window.Plotly);
      script.onerror = () => { window[PLOTLY] = null; reject(new Error("could not load " + url)); };
      document.head.appendChild(script);
    });
  }
  return window[PLOTLY];
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

function decodeMaps(base64, shape) {
  const raw = atob(base64), n = raw.length >> 1, table = halfTable(), out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = table[raw.charCodeAt(2 * i) | (raw.charCodeAt(2 * i + 1) << 8)];
  const [, heads, rows, cols] = shape;
  return (layerIndex, head) => {
    const first = (layerIndex * heads + head) * rows;
    return Array.from({ length: rows }, (_, r) => out.subarray((first + r) * cols, (first + r + 1) * cols));
  };
}

function build(parentElement) {
  const root = document.createElement("div");
  root.className = "txviz-head-maps";
  root.tabIndex = 0;
  root.setAttribute("aria-label", "Attention map; arrow keys: left and right switch heads, up and down layers");
  root.innerHTML = '<div class="txviz-head-bar" role="toolbar" aria-label="Head"></div>' +
    '<label class="txviz-layer" hidden>Layer <input type="range" min="0" step="1"> <output></output></label>' +
    '<div class="txviz-head-plot"></div><p class="txviz-head-caption"></p>' +
    '<button type="button" class="txviz-head-open" hidden></button>';
  parentElement.appendChild(root);
  root.txviz = { mapsId: null, layer: 0, head: 0, serverView: null, paints: 0 };
  return root;
}

function figureOf(data, state) {
  const figure = JSON.parse(JSON.stringify(data.figure)), index = data.layers.indexOf(state.layer), head = state.head;
  figure.data[0].z = state.rowsOf(index, head);
  figure.data[0].zmax = data.zmax[index][head];
  figure.layout.title = { ...(figure.layout.title || {}), text: data.titles[index][head] };
  if (figure.data[0].colorbar && data.colorbar_titles) {
    figure.data[0].colorbar.title = { ...(figure.data[0].colorbar.title || {}), text: data.colorbar_titles[index][head] };
  }
  return figure;
}

// startedAt: the performance.now() time of the click or key that asked for this view (null: a rerun)
function paint(root, data, setTriggerValue, startedAt = null) {
  const state = root.txviz, { layer, head } = state, plot = root.querySelector(".txviz-head-plot");
  root.querySelectorAll(".txviz-head-bar button").forEach((button, h) => {
    button.setAttribute("aria-pressed", String(h === head));
    button.title = `Layer ${layer}, head ${h}`;
  });
  const slider = root.querySelector(".txviz-layer input");
  slider.value = String(data.layers.indexOf(layer));
  root.querySelector(".txviz-layer output").textContent = String(layer);
  root.querySelector(".txviz-head-caption").textContent = data.captions[data.layers.indexOf(layer)][head];
  const open = root.querySelector(".txviz-head-open");
  open.hidden = head === data.head && layer === data.layer;
  open.textContent = `Show layer ${layer}, head ${head} in the views below (head view, step by step, download)`;
  open.onclick = () => setTriggerValue("open", { layer, head });
  const figure = figureOf(data, state);
  return window.Plotly.react(plot, figure.data, figure.layout, { displaylogo: false, responsive: true })
    .then(() => new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0))))  // after the frame
    .then(() => {
      state.paints += 1;  // what a test or the benchmark waits for: this head of this layer is on screen
      if (startedAt !== null) root.dataset.switchMs = (performance.now() - startedAt).toFixed(1);
      root.dataset.painted = `${layer}:${head}:${state.paints}`;
      root.dataset.layer = String(layer);
      root.dataset.head = String(head);
    });
}

function headBar(root, data, show) {
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
  label.hidden = data.layers.length < 2;  // one layer sent: the page's slider switches layers
  slider.max = String(data.layers.length - 1);
  slider.oninput = (event) => show(data.layers[Number(slider.value)], root.txviz.head, event);
}

export default function (component) {
  const { data, parentElement, setTriggerValue } = component;
  const root = parentElement.querySelector(".txviz-head-maps") || build(parentElement);
  const state = root.txviz;
  if (state.mapsId !== data.maps_id) {  // new maps (a prompt, sink or layer change): decode once
    state.rowsOf = decodeMaps(data.maps, data.shape);
    state.mapsId = data.maps_id;
  }
  const serverView = `${data.layer}:${data.head}`;
  if (state.serverView !== serverView || !data.layers.includes(state.layer)) {
    state.layer = data.layer;  // the page's layer or head moved (its widgets, a grid click, a link)
    state.head = data.head;  // otherwise what the reader picked here stays
  }
  state.serverView = serverView;
  root.txvizData = data;
  const show = (layer, head, event) => {
    if ((layer === state.layer && head === state.head) || head < 0 || head >= data.n_heads
        || !data.layers.includes(layer)) return;
    state.layer = layer;
    state.head = head;
    paint(root, root.txvizData, setTriggerValue, event.timeStamp);
  };
  headBar(root, data, show);
  root.onkeydown = (event) => {
    if (event.target.tagName === "INPUT") return;  // the layer slider handles its own keys
    const index = data.layers.indexOf(state.layer);
    const moves = { ArrowLeft: [index, state.head - 1], ArrowRight: [index, state.head + 1],
                    ArrowUp: [index - 1, state.head], ArrowDown: [index + 1, state.head] };
    const move = moves[event.key];
    if (!move) return;
    event.preventDefault();
    if (move[0] >= 0 && move[0] < data.layers.length) show(data.layers[move[0]], move[1], event);
  };
  loadPlotly(data.plotly_url)
    .then(() => paint(root, data, setTriggerValue))
    .catch((error) => {
      root.querySelector(".txviz-head-caption").textContent =
        `The interactive map could not load (${error.message}): open "The map as a plain chart" below.`;
    });
}
