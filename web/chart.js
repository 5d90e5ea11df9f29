// A small line chart in SVG, drawn without libraries: the last N samples of one series.
const SVG = 'http://www.w3.org/2000/svg';

export class Sparkline {
  constructor(container, label, format) {
    this.values = [];
    this.max = 60;
    this.format = format || ((v) => (v === null ? '–' : String(Math.round(v * 10) / 10)));
    this.root = document.createElement('div');
    this.root.className = 'chart';
    const title = document.createElement('div');
    title.className = 'muted';
    title.textContent = label;
    this.value = document.createElement('div');
    this.value.className = 'value';
    this.value.textContent = '–';
    this.svg = document.createElementNS(SVG, 'svg');
    this.svg.setAttribute('viewBox', '0 0 300 60');
    this.svg.setAttribute('preserveAspectRatio', 'none');
    this.svg.setAttribute('role', 'img');
    this.svg.setAttribute('aria-label', label);
    const axis = document.createElementNS(SVG, 'line');
    axis.setAttribute('class', 'axis');
    axis.setAttribute('x1', '0'); axis.setAttribute('x2', '300');
    axis.setAttribute('y1', '59'); axis.setAttribute('y2', '59');
    this.line = document.createElementNS(SVG, 'polyline');
    this.svg.append(axis, this.line);
    this.root.append(title, this.value, this.svg);
    container.append(this.root);
  }

  push(v) {
    this.values.push(v);
    if (this.values.length > this.max) this.values.shift();
    this.value.textContent = this.format(v);
    const known = this.values.filter((x) => x !== null);
    const top = Math.max(1, ...known) * 1.1;
    const step = 300 / (this.max - 1);
    const offset = this.max - this.values.length;
    const points = [];
    this.values.forEach((x, i) => {
      if (x === null) return;
      points.push(((offset + i) * step).toFixed(1) + ',' + (58 - (x / top) * 56).toFixed(1));
    });
    this.line.setAttribute('points', points.join(' '));
  }
}

// Parses the Prometheus text format into {name: value} (series with labels keep them in the
// name: 'ichido_http_responses_total{code="200"}').
export function parseMetrics(text) {
  const out = {};
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const i = line.lastIndexOf(' ');
    if (i < 0) continue;
    out[line.slice(0, i)] = Number(line.slice(i + 1));
  }
  return out;
}

// The sum of every series of one metric name (any labels).
export function sumOf(m, name) {
  let s = 0;
  for (const [k, v] of Object.entries(m)) {
    if (k === name || k.startsWith(name + '{')) s += v;
  }
  return s;
}
