// The head table component (app/components/head_table/__init__.py says what it is for). Streamlit calls
// the default export on mount and whenever the data changes; the <table> is kept, its header rebuilt only
// when the columns change. A click on a header sorts by that column (a second click: the other way);
// undefined values (null) are "—" and sort last either way. Only the rows in view (and a few either side)
// are in the DOM, between two spacer rows, as the data grid it replaced drew only what shows: laying out
// every row of 270 heads cost 35-100 ms per prompt here. Scrolling redraws the window.

const UNDEFINED = "—";
const ROW_PX = 24;  // each row's fixed height (head_table.css), so a scroll position is a row index
const EXTRA_ROWS = 8;  // drawn beyond each edge of the view, so a short scroll shows no gap

function build(parentElement) {
  const root = document.createElement("div");
  root.className = "txviz-head-table";
  root.innerHTML = "<table><thead><tr></tr></thead><tbody></tbody></table>";
  parentElement.appendChild(root);
  root.querySelector("thead").addEventListener("click", (event) => {
    const header = event.target.closest("th");
    if (!header) return;
    const column = Number(header.dataset.column);
    root.txvizSort = { column, descending: root.txvizSort?.column === column ? !root.txvizSort.descending : false };
    drawBody(root);
  });
  root.addEventListener("scroll", () => {
    if (root.txvizScrollFrame) return;
    root.txvizScrollFrame = requestAnimationFrame(() => { root.txvizScrollFrame = 0; drawWindow(root); });
  });
  root.txvizShown = () => root.txvizSorted.map((row) => row.map((value, i) => text(value, root.txvizData.columns[i].decimals)));
  return root;
}

function drawHeader(root) {
  const row = root.querySelector("thead tr"), columns = root.txvizData.columns;
  const names = columns.map((c) => c.name + "\u0000" + c.help).join("\u0001");
  if (root.txvizHeader === names) return;  // the same columns: the headers, and the sort, stay
  root.txvizHeader = names;
  row.replaceChildren(...columns.map((column, i) => {
    const header = document.createElement("th");
    header.textContent = column.name;
    header.title = column.help;
    header.dataset.column = String(i);
    return header;
  }));
  if (root.txvizSort && root.txvizSort.column >= columns.length) root.txvizSort = null;
}

function sortedRows(rows, sort) {
  if (!sort) return rows;
  const { column, descending } = sort, sign = descending ? -1 : 1;
  return rows.map((row, i) => [row, i]).sort(([a, i], [b, j]) => {
    const x = a[column], y = b[column];
    if (x === null || y === null) return x === y ? i - j : x === null ? 1 : -1;  // undefined last
    return x === y ? i - j : (x < y ? -sign : sign);
  }).map(([row]) => row);
}

const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" };

function text(value, decimals) {
  if (value === null) return UNDEFINED;
  return decimals === null ? String(value) : Number(value).toFixed(decimals);
}

function cell(value, decimals) {
  const shown = text(value, decimals).replace(/[&<>"]/g, (c) => ESCAPES[c]);
  return value === null ? `<td class="undefined">${shown}</td>` : `<td>${shown}</td>`;
}

function drawWindow(root) {
  const rows = root.txvizSorted, columns = root.txvizData.columns, header = root.querySelector("thead").offsetHeight;
  const first = Math.max(0, Math.floor(Math.max(0, root.scrollTop - header) / ROW_PX) - EXTRA_ROWS);
  const last = Math.min(rows.length, first + Math.ceil(root.clientHeight / ROW_PX) + 2 * EXTRA_ROWS);
  const spacer = (n) => (n > 0 ? `<tr class="spacer"><td colspan="${columns.length}" style="height: ${n * ROW_PX}px"></td></tr>` : "");
  root.querySelector("tbody").innerHTML = spacer(first) + rows.slice(first, last)
    .map((row) => `<tr>${row.map((value, i) => cell(value, columns[i].decimals)).join("")}</tr>`).join("")
    + spacer(rows.length - last);
  root.dataset.firstRow = String(first);
}

function drawBody(root) {
  const sort = root.txvizSort;
  root.txvizSorted = sortedRows(root.txvizData.rows, sort);
  drawWindow(root);
  root.querySelectorAll("th").forEach((header, i) => {
    if (sort && sort.column === i) header.setAttribute("aria-sort", sort.descending ? "descending" : "ascending");
    else header.removeAttribute("aria-sort");
  });
  root.dataset.painted = String(Number(root.dataset.painted || 0) + 1);
}

export default function (component) {
  const { data, parentElement } = component;
  const root = parentElement.querySelector(".txviz-head-table") || build(parentElement);
  root.txvizData = data;
  drawHeader(root);
  drawBody(root);
}
