// The head table component (app/components/head_table/__init__.py says what it is for). Streamlit calls
// the default export on mount and whenever the data changes; the <table> is kept, its header rebuilt only
// when the columns change, its body rewritten as one string. A click on a header sorts by that column
// (a second click: the other way); undefined values (null) are "—" and sort last either way.

const UNDEFINED = "—";

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

function cell(value, decimals) {
  if (value === null) return `<td class="undefined">${UNDEFINED}</td>`;
  const text = decimals === null ? String(value) : Number(value).toFixed(decimals);
  return `<td>${text.replace(/[&<>"]/g, (c) => ESCAPES[c])}</td>`;
}

function drawBody(root) {
  const { columns, rows } = root.txvizData, sort = root.txvizSort;
  root.querySelector("tbody").innerHTML = sortedRows(rows, sort)
    .map((row) => `<tr>${row.map((value, i) => cell(value, columns[i].decimals)).join("")}</tr>`).join("");
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
