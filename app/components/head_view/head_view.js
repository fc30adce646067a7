// The head view component (app/components/head_view/__init__.py says what it is for): the plotly figure
// of charts.head_view drawn as SVG. Its line traces become <line>s (width, colour, hover text), its text
// traces the two columns of labels; the axes are plotly's: x over layout.xaxis.range, y reversed over
// the labels' positions. Streamlit calls the default export on mount and whenever the data changes.

const SVG = "http://www.w3.org/2000/svg";
const TYPES = { i1: Int8Array, u1: Uint8Array, i2: Int16Array, u2: Uint16Array, i4: Int32Array, u4: Uint32Array,
                f4: Float32Array, f8: Float64Array };

function values(array) {  // a plotly array: a list, or {"dtype", "bdata"} (base64) as plotly.py writes numpy
  if (!array || Array.isArray(array)) return array || [];
  const bytes = Uint8Array.from(atob(array.bdata), (c) => c.charCodeAt(0));
  return Array.from(new TYPES[array.dtype](bytes.buffer));
}

function element(name, attributes) {
  const node = document.createElementNS(SVG, name);
  Object.entries(attributes).forEach(([key, value]) => node.setAttribute(key, String(value)));
  return node;
}

function build(parentElement) {
  const root = document.createElement("div");
  root.className = "txviz-head-view";
  const hover = document.createElement("div");
  hover.className = "hovertext";
  hover.hidden = true;
  root.append(element("svg", {}), hover);
  parentElement.appendChild(root);
  new ResizeObserver(() => { if (root.txvizFigure && root.clientWidth !== root.txvizWidth) draw(root); }).observe(root);
  return root;
}

function draw(root) {
  const { data, layout } = root.txvizFigure, width = Math.max(200, root.clientWidth), height = layout.height || 450;
  const margin = { l: 10, r: 10, t: 10, b: 10, ...(layout.margin || {}) }, [x0, x1] = layout.xaxis.range;
  const ys = data.flatMap((trace) => values(trace.y));
  const low = Math.min(...ys) - 0.5, high = Math.max(...ys) + 0.5;  // reversed: the first token on top
  const px = (x) => margin.l + ((x - x0) / (x1 - x0)) * (width - margin.l - margin.r);
  const py = (y) => margin.t + ((y - low) / (high - low)) * (height - margin.t - margin.b);
  const svg = root.querySelector("svg");
  svg.setAttribute("width", width);
  svg.setAttribute("height", height);
  root.txvizWidth = root.clientWidth;
  const drawn = [];
  data.filter((trace) => trace.mode === "lines").forEach((trace) => {
    const [xa, xb] = values(trace.x), [ya, yb] = values(trace.y), at = { x1: px(xa), y1: py(ya), x2: px(xb), y2: py(yb) };
    const line = element("line", { ...at, stroke: trace.line.color, "stroke-width": trace.line.width, "stroke-linecap": "round" });
    const target = element("line", { ...at, stroke: "transparent", "stroke-width": Math.max(10, trace.line.width) });
    target.addEventListener("mousemove", (event) => showHover(root, event, trace.text));
    target.addEventListener("mouseleave", () => { root.querySelector(".hovertext").hidden = true; });
    drawn.push(line, target);
  });
  data.filter((trace) => trace.mode === "text").forEach((trace) => {
    const left = (trace.textposition || "").endsWith("left"), xs = values(trace.x), font = trace.textfont || {};
    values(trace.y).forEach((y, i) => {
      const color = Array.isArray(font.color) ? font.color[i] : font.color || "black";
      const text = element("text", { x: px(xs[i]) + (left ? -4 : 4), y: py(y), "text-anchor": left ? "end" : "start",
                                     "dominant-baseline": "middle", fill: color, "font-size": font.size || 12 });
      text.textContent = trace.text[i];
      drawn.push(text);
    });
  });
  svg.replaceChildren(...drawn);
  root.dataset.painted = String(Number(root.dataset.painted || 0) + 1);
}

function showHover(root, event, text) {
  const hover = root.querySelector(".hovertext"), box = root.getBoundingClientRect();
  hover.textContent = text;
  hover.hidden = false;
  hover.style.left = `${event.clientX - box.left + 12}px`;
  hover.style.top = `${event.clientY - box.top + 12}px`;
}

export default function (component) {
  const { data, parentElement } = component;
  const root = parentElement.querySelector(".txviz-head-view") || build(parentElement);
  root.txvizFigure = data.figure;
  draw(root);
}
