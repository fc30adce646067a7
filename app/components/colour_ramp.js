// Colour scales for the components that paint on a <canvas>: a plotly colour scale ([[position, colour], ...])
// read once into 256 RGB colours, so a cell's colour is one lookup. Joined in front of each component's own script.

function colorOf(text) {  // "rgb(r,g,b)" or "#rrggbb" -> [r, g, b]
  if (text.startsWith("#")) return [1, 3, 5].map((i) => parseInt(text.slice(i, i + 2), 16));
  return text.slice(text.indexOf("(") + 1, text.indexOf(")")).split(",").slice(0, 3).map(Number);
}

const RAMPS = new Map();  // one ramp per scale
function rampOf(scale) {
  const key = JSON.stringify(scale);
  if (RAMPS.has(key)) return RAMPS.get(key);
  const stops = scale.map(([at, color]) => [at, colorOf(color)]), ramp = new Uint8ClampedArray(256 * 3);
  for (let i = 0, s = 0; i < 256; i++) {
    const at = i / 255;
    while (s < stops.length - 2 && stops[s + 1][0] < at) s++;
    const [a, ca] = stops[s], [b, cb] = stops[s + 1], t = b > a ? Math.min(1, Math.max(0, (at - a) / (b - a))) : 0;
    for (let c = 0; c < 3; c++) ramp[i * 3 + c] = ca[c] + (cb[c] - ca[c]) * t;
  }
  RAMPS.set(key, ramp);
  return ramp;
}
