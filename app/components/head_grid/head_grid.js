// The head grid component (app/components/head_grid/__init__.py says what it is for). Streamlit calls the
// default export on mount and whenever the data changes; the canvas is kept and repainted in place. The
// data (app/figures/head_grid.py) carries each cell's colour and hover text: nothing is computed here
// but where things go.

const FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif";
const MARGIN = { top: 36, left: 44, right: 10, bottom: 44 };  // head ticks and title; layer ticks and title; colour bar

function build(parentElement) {
  const root = document.createElement("div");
  root.className = "txviz-head-grid";
  const canvas = document.createElement("canvas"), hover = document.createElement("div");
  hover.className = "hovertext";
  hover.hidden = true;
  root.append(canvas, hover);
  parentElement.appendChild(root);
  canvas.addEventListener("mousemove", (event) => showHover(root, event));
  canvas.addEventListener("mouseleave", () => { hover.hidden = true; });
  canvas.addEventListener("click", (event) => {
    const cell = cellAt(root, event.offsetX, event.offsetY);
    if (cell) root.txvizPick({ layer: root.txvizData.layers[cell.row], head: cell.col });
  });
  new ResizeObserver(() => { if (root.txvizData && root.clientWidth !== root.txvizWidth) draw(root); }).observe(root);
  canvas.txvizCellCenter = (layer, head) => {  // client coordinates of (layer, head) in cell units
    const box = geometry(root), rect = canvas.getBoundingClientRect(), first = root.txvizData.layers[0];
    return [rect.left + box.left + (head + 0.5) * box.cellWidth, rect.top + box.top + (layer - first + 0.5) * box.cellHeight];
  };
  canvas.txvizCellAt = (x, y) => {  // the (layer, head) under client coordinates, or null
    const rect = canvas.getBoundingClientRect(), cell = cellAt(root, x - rect.left, y - rect.top);
    return cell && [root.txvizData.layers[cell.row], cell.col];
  };
  return root;
}

function geometry(root) {
  const data = root.txvizData, width = Math.max(200, root.clientWidth), height = data.height;
  const cellWidth = (width - MARGIN.left - MARGIN.right) / data.n_heads;
  const cellHeight = (height - MARGIN.top - MARGIN.bottom) / data.layers.length;
  return { width, height, left: MARGIN.left, top: MARGIN.top, cellWidth, cellHeight };
}

function cellAt(root, x, y) {
  const box = geometry(root), col = Math.floor((x - box.left) / box.cellWidth);
  const row = Math.floor((y - box.top) / box.cellHeight);
  const inside = col >= 0 && col < root.txvizData.n_heads && row >= 0 && row < root.txvizData.layers.length;
  return inside ? { row, col } : null;
}

function draw(root) {
  const data = root.txvizData, box = geometry(root), canvas = root.querySelector("canvas");
  const ratio = window.devicePixelRatio || 1;
  canvas.width = Math.round(box.width * ratio);
  canvas.height = Math.round(box.height * ratio);
  canvas.style.width = `${box.width}px`;
  canvas.style.height = `${box.height}px`;
  root.txvizWidth = root.clientWidth;
  const ctx = canvas.getContext("2d");
  ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  ctx.clearRect(0, 0, box.width, box.height);
  data.layers.forEach((layer, row) => {
    for (let head = 0; head < data.n_heads; head++) {
      const x = box.left + head * box.cellWidth, y = box.top + row * box.cellHeight;
      ctx.fillStyle = data.colors[row][head];
      ctx.fillRect(x, y, box.cellWidth, box.cellHeight);
      ctx.strokeStyle = "white";  // each cell's 1 px white edge, as the bars had
      ctx.lineWidth = 1;
      ctx.strokeRect(x + 0.5, y + 0.5, box.cellWidth - 1, box.cellHeight - 1);
    }
  });
  drawAxes(ctx, data, box);
  drawColorBar(ctx, data, box);
  const selected = data.selected, row = selected ? data.layers.indexOf(selected[0]) : -1;
  if (row >= 0) {
    ctx.strokeStyle = "red";
    ctx.lineWidth = 3;
    ctx.strokeRect(box.left + selected[1] * box.cellWidth, box.top + row * box.cellHeight, box.cellWidth, box.cellHeight);
  }
  root.dataset.selected = selected ? selected.join(":") : "";
  root.dataset.metric = data.metric;
  root.dataset.painted = String(Number(root.dataset.painted || 0) + 1);
}

function drawAxes(ctx, data, box) {
  ctx.fillStyle = "#444";
  ctx.font = `12px ${FONT}`;
  ctx.textAlign = "center";
  ctx.textBaseline = "alphabetic";
  ctx.fillText("head", box.left + (data.n_heads * box.cellWidth) / 2, 12);
  ctx.font = `11px ${FONT}`;
  for (let head = 0; head < data.n_heads; head++) ctx.fillText(String(head), box.left + (head + 0.5) * box.cellWidth, box.top - 6);
  ctx.textAlign = "right";
  ctx.textBaseline = "middle";
  const every = data.layers.length <= 16 ? 1 : 2;  // as plotly's dtick did
  data.layers.forEach((layer, row) => {
    if ((layer - data.layers[0]) % every === 0) ctx.fillText(String(layer), box.left - 5, box.top + (row + 0.5) * box.cellHeight);
  });
  ctx.save();
  ctx.translate(12, box.top + (data.layers.length * box.cellHeight) / 2);
  ctx.rotate(-Math.PI / 2);
  ctx.textAlign = "center";
  ctx.font = `12px ${FONT}`;
  ctx.fillText("layer", 0, 0);
  ctx.restore();
}

function drawColorBar(ctx, data, box) {
  const y = box.top + data.layers.length * box.cellHeight + 8, width = data.n_heads * box.cellWidth;
  const gradient = ctx.createLinearGradient(box.left, 0, box.left + width, 0);
  data.scale.forEach(([at, color]) => gradient.addColorStop(at, color));
  ctx.fillStyle = gradient;
  ctx.fillRect(box.left, y, width, 12);
  ctx.fillStyle = "#444";
  ctx.font = `11px ${FONT}`;
  ctx.textBaseline = "top";
  const label = (value) => Number(value.toPrecision(3)).toString();
  ctx.textAlign = "left";
  ctx.fillText(label(data.low), box.left, y + 16);
  ctx.textAlign = "right";
  ctx.fillText(label(data.high), box.left + width, y + 16);
  ctx.textAlign = "center";
  ctx.fillText(data.metric, box.left + width / 2, y + 16);
}

function showHover(root, event) {
  const hover = root.querySelector(".hovertext"), cell = cellAt(root, event.offsetX, event.offsetY);
  if (!cell) {
    hover.hidden = true;
    return;
  }
  const lines = root.txvizData.hover[cell.row][cell.col].split("<br>");
  hover.replaceChildren(...lines.flatMap((line, i) => (i ? [document.createElement("br"), line] : [line])));
  hover.hidden = false;
  const left = event.offsetX + 12, flip = left + hover.offsetWidth > root.clientWidth;
  hover.style.left = `${flip ? event.offsetX - hover.offsetWidth - 8 : left}px`;
  hover.style.top = `${event.offsetY + 12}px`;
}

export default function (component) {
  const { data, parentElement, setTriggerValue } = component;
  const root = parentElement.querySelector(".txviz-head-grid") || build(parentElement);
  root.txvizData = data;
  root.txvizPick = (cell) => setTriggerValue("pick", cell);
  draw(root);
}
