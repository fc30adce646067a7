// One head's map drawn on a <canvas>: the cells as one ImageData scaled up and the colour bar;
// the title, token labels and axis titles as SVG text over it; the hover text of the plotly figure the view carries (its x and y labels, colour
// scale, height, axis titles and hovertemplate). It replaced Plotly.react on the plotly package's
// plotly.min.js, whose second 3.5 MB parse in a page that already holds Streamlit's own copy, and whose
// full relayout per repaint, cost more than the map. head_maps.js (concatenated after this file) calls
// drawHeatmap; nothing here knows about blobs or layers. One module scope with that file: no name twice.
//
// The plot element keeps plotly's class names on what they name here too (the plot "js-plotly-plot", its
// svg "main-svg" holding the title "gtitle", the hover box "hovertext"), since the browser tests'
// shared selector for "a figure is drawn" (tests/helpers/browser.py CHART) reads them.

const FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif";
const TICK_FONT = `10px ${FONT}`;
const TITLE_FONT = `12px ${FONT}`;
const MARGIN = { top: 40, right: 12, gap: 6, colorbar: 14 };
const SVG = "http://www.w3.org/2000/svg";

function buildPlot(plot) {
  plot.classList.add("js-plotly-plot");
  plot.innerHTML = "";
  const canvas = document.createElement("canvas"), svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("class", "main-svg");
  const title = document.createElementNS(SVG, "text");
  title.setAttribute("class", "gtitle");
  title.setAttribute("y", "24");
  svg.appendChild(title);
  const hover = document.createElement("div");
  hover.className = "hovertext";
  hover.hidden = true;
  plot.append(canvas, svg, hover);
  canvas.addEventListener("mousemove", (event) => showHover(plot, event));
  canvas.addEventListener("mouseleave", () => { hover.hidden = true; });
  new ResizeObserver(() => { if (plot.txvizMap && plot.clientWidth !== plot.txvizMap.width) drawPlot(plot); }).observe(plot);
  return plot;
}

// Where the cells go: margins wide enough for the longest labels (the keys' turned 60°, as plotly does).
function layoutOf(ctx, spec, width) {
  ctx.font = TICK_FONT;
  const widest = (labels) => labels.reduce((w, label) => Math.max(w, ctx.measureText(String(label)).width), 0);
  const left = 16 + MARGIN.gap + widest(spec.y) + 4, bottom = 16 + MARGIN.gap + widest(spec.x) * 0.87 + 8;
  const right = MARGIN.gap * 2 + MARGIN.colorbar + 44 + MARGIN.right;
  return { left, top: MARGIN.top, width: Math.max(40, width - left - right), height: Math.max(40, spec.height - MARGIN.top - bottom) };
}

function every(count, pixels, room) {  // label every k-th row or column so that labels do not overlap
  return Math.max(1, Math.ceil(room / Math.max(pixels / count, 1e-6)));
}

function niceTicks(top) {
  if (!(top > 0)) return [0];
  const raw = top / 4, power = 10 ** Math.floor(Math.log10(raw)), step = [1, 2, 2.5, 5, 10].map((m) => m * power).find((s) => s >= raw);
  const ticks = [];
  for (let v = 0; v <= top * (1 + 1e-9); v += step) ticks.push(Number(v.toPrecision(6)));
  return ticks;
}

function drawCells(ctx, spec, box) {
  const rows = spec.rows, n = rows.length, m = n ? rows[0].length : 0, ramp = rampOf(spec.colorscale);
  const image = new ImageData(Math.max(m, 1), Math.max(n, 1)), pixels = image.data, scale = 255 / (spec.zmax || 1);
  for (let r = 0; r < n; r++) {
    const row = rows[r];
    for (let c = 0, at = r * m * 4; c < m; c++, at += 4) {
      const z = row[c];
      if (z !== z) continue;  // NaN: the future, left transparent over the masked colour
      const i = Math.min(255, Math.max(0, Math.round(z * scale))) * 3;
      pixels[at] = ramp[i]; pixels[at + 1] = ramp[i + 1]; pixels[at + 2] = ramp[i + 2]; pixels[at + 3] = 255;
    }
  }
  const cells = document.createElement("canvas");
  cells.width = image.width;
  cells.height = image.height;
  cells.getContext("2d").putImageData(image, 0, 0);
  ctx.fillStyle = spec.background;
  ctx.fillRect(box.left, box.top, box.width, box.height);
  ctx.imageSmoothingEnabled = false;  // one block per cell, kept crisp
  ctx.drawImage(cells, box.left, box.top, box.width, box.height);
}

// The token labels and axis titles as SVG text (selectable, and the page's text says which prompt is
// drawn), rebuilt only when they or the cells' box change: a head switch keeps them.
function drawLabels(svg, spec, box) {
  const key = [box.left, box.top, box.width, box.height, spec.xTitle, spec.yTitle, spec.height, ...spec.x, "|", ...spec.y].join("\u0001");
  if (svg.txvizLabels === key) return;
  svg.txvizLabels = key;
  const n = spec.y.length, m = spec.x.length, cellW = box.width / Math.max(m, 1), cellH = box.height / Math.max(n, 1);
  const text = (className, content, x, y, anchor, rotate) => {
    const node = document.createElementNS(SVG, "text");
    node.setAttribute("class", className);
    node.setAttribute("text-anchor", anchor);
    node.setAttribute("dominant-baseline", "central");
    node.setAttribute("transform", `translate(${x.toFixed(1)},${y.toFixed(1)})${rotate ? ` rotate(${rotate})` : ""}`);
    node.textContent = String(content);
    return node;
  };
  const nodes = [];
  for (let r = 0, step = every(n, box.height, 11); r < n; r += step) {
    nodes.push(text("ytick", spec.y[r], box.left - MARGIN.gap, box.top + (r + 0.5) * cellH, "end", 0));
  }
  for (let c = 0, step = every(m, box.width, 12); c < m; c += step) {
    nodes.push(text("xtick", spec.x[c], box.left + (c + 0.5) * cellW, box.top + box.height + MARGIN.gap, "end", -60));
  }
  nodes.push(text("xtitle", spec.xTitle, box.left + box.width / 2, spec.height - 10, "middle", 0));
  nodes.push(text("ytitle", spec.yTitle, 10, box.top + box.height / 2, "middle", -90));
  svg.querySelectorAll(".ytick, .xtick, .xtitle, .ytitle").forEach((node) => node.remove());
  svg.append(...nodes);
}

function drawColorbar(ctx, spec, box) {
  const x = box.left + box.width + MARGIN.gap * 2, top = box.top + 30, height = Math.max(20, box.height - 30);
  const ramp = rampOf(spec.colorscale), gradient = ctx.createLinearGradient(0, top + height, 0, top);
  for (let i = 0; i < 256; i += 15) gradient.addColorStop(i / 255, `rgb(${ramp[i * 3]},${ramp[i * 3 + 1]},${ramp[i * 3 + 2]})`);
  gradient.addColorStop(1, `rgb(${ramp[765]},${ramp[766]},${ramp[767]})`);
  ctx.fillStyle = gradient;
  ctx.fillRect(x, top, MARGIN.colorbar, height);
  ctx.fillStyle = "#444";
  ctx.font = TICK_FONT;
  ctx.textAlign = "left";
  niceTicks(spec.zmax).forEach((v) => ctx.fillText(String(v), x + MARGIN.colorbar + 4, top + height * (1 - v / (spec.zmax || 1))));
  ctx.font = TITLE_FONT;
  ctx.textBaseline = "bottom";
  spec.colorbarTitle.split("<br>").forEach((line, i, lines) => ctx.fillText(line, x, top - 8 - 14 * (lines.length - 1 - i)));
}

function drawPlot(plot) {
  const spec = plot.txvizMap.spec, canvas = plot.querySelector("canvas"), ratio = window.devicePixelRatio || 1;
  const width = plot.clientWidth || 600, ctx = canvas.getContext("2d");
  canvas.width = Math.round(width * ratio);
  canvas.height = Math.round(spec.height * ratio);
  canvas.style.width = `${width}px`;
  canvas.style.height = `${spec.height}px`;
  ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  const box = layoutOf(ctx, spec, width);
  plot.txvizMap = { spec, box, width };
  drawCells(ctx, spec, box);
  drawColorbar(ctx, spec, box);
  const svg = plot.querySelector("svg.main-svg"), title = svg.querySelector(".gtitle");
  svg.setAttribute("width", String(width));
  svg.setAttribute("height", String(spec.height));
  drawLabels(svg, spec, box);
  title.setAttribute("x", String(box.left));
  title.textContent = spec.title;
}

// d3's ".3r" as the hovertemplate asks (3 significant digits, no exponent), or 4 decimals.
function formatZ(z, format) {
  const digits = /\.(\d+)r/.exec(format);
  if (digits) return String(Number(z.toPrecision(Number(digits[1]))));
  const fixed = /\.(\d+)f/.exec(format);
  return fixed ? z.toFixed(Number(fixed[1])) : String(z);
}

// The template's lines with its fields filled in one pass by a function: a token's own "$&", "$$", "%{y}"
// or "<br>" stays as written (a replacement string would expand "$" patterns, and a second pass would fill
// a field the token spelled out).
function hoverText(template, x, y, z) {
  const field = (_, name, format) => (name === "x" ? String(x) : name === "y" ? String(y) : formatZ(z, format || ""));
  return template.replace(/<extra>.*?<\/extra>/g, "").split("<br>")
    .map((line) => line.replace(/%\{([xyz])(:[^}]*)?\}/g, field));
}

// The cell under the pointer, or null (outside the cells, or a masked one: plotly's hoverongaps false).
function cellAt(plot, clientX, clientY) {
  const { spec, box } = plot.txvizMap, rect = plot.querySelector("canvas").getBoundingClientRect();
  const col = Math.floor((clientX - rect.left - box.left) / (box.width / spec.x.length));
  const row = Math.floor((clientY - rect.top - box.top) / (box.height / spec.y.length));
  if (row < 0 || col < 0 || row >= spec.y.length || col >= spec.x.length) return null;
  const z = spec.rows[row][col];
  return z === z ? { row, col, z } : null;
}

function showHover(plot, event) {
  const hover = plot.querySelector(".hovertext"), cell = plot.txvizMap && cellAt(plot, event.clientX, event.clientY);
  if (!cell) {
    hover.hidden = true;
    return;
  }
  const { spec } = plot.txvizMap;
  const lines = hoverText(spec.hovertemplate, spec.x[cell.col], spec.y[cell.row], cell.z);
  hover.replaceChildren(...lines.flatMap((line, i) => (i ? [document.createElement("br"), line] : [line])));
  const rect = plot.getBoundingClientRect();
  hover.style.left = `${event.clientX - rect.left + 12}px`;
  hover.style.top = `${event.clientY - rect.top + 12}px`;
  hover.hidden = false;
}

// Draw ``spec`` ({rows, zmax, x, y, colorscale, background, height, title, xTitle, yTitle, colorbarTitle,
// hovertemplate}) into ``plot``. What tests read back: plot.txvizCell(q, k) the value drawn,
// plot.txvizCellCenter(q, k) where that cell is on the screen, plot.txvizMap.spec the labels.
function drawHeatmap(plot, spec) {
  if (!plot.querySelector("canvas")) buildPlot(plot);
  plot.txvizMap = { spec };
  plot.txvizCell = (row, col) => plot.txvizMap.spec.rows[row][col];
  plot.txvizCellCenter = (row, col) => {
    const { box } = plot.txvizMap, rect = plot.querySelector("canvas").getBoundingClientRect(), s = plot.txvizMap.spec;
    return [rect.left + box.left + (col + 0.5) * box.width / s.x.length, rect.top + box.top + (row + 0.5) * box.height / s.y.length];
  };
  drawPlot(plot);
}
