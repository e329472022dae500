// Small SVG charts of daily (or hourly) series: bars (stacked when there are several series) or a line.
// Every mark carries a <title> (a tooltip), the picture a summary for screen readers, and a
// hidden table repeats the figures.
import { fmt, t } from './boot.js';
import { h } from './ui.js';

const NS = 'http://www.w3.org/2000/svg';
// The left margin holds an axis label of money with its currency ("10,00 US$").
const W = 640, H = 240, PAD = { top: 12, right: 12, bottom: 28, left: 76 };

function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  for (const c of children) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

// niceMax rounds the top of the scale up to 1, 2 or 5 times a power of ten.
function niceMax(v) {
  if (v <= 0) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

// dayTicks labels every day of a short range, every few days of a longer one.
const dayTicks = (d, i, all) => (i % Math.ceil(all.length / 8) === 0 ? fmt.day(d) : '');

/**
 * chart draws into el.
 * days: the x values, ['YYYY-MM-DD', ...] unless the other options say how to read them;
 * series: [{key, label, values: [number], cls}]; format: value -> text; type: 'bar' | 'line'.
 * Other x values (hours) bring their words: name (an x value in a tooltip), full (its row of
 * the hidden table), tick ((x, i, all) -> its axis label, '' for none) and keyLabel (the
 * heading of the hidden table's x column). width is the drawing's, in the units of its text: a
 * chart across a wide page is drawn wider rather than scaled up, letters and all.
 */
export function chart(el, { days, series, format, type = 'bar', label, integer = false,
  name = fmt.day, full = fmt.date, tick = dayTicks, keyLabel = t('common.day'), width = W }) {
  const plotW = width - PAD.left - PAD.right, plotH = H - PAD.top - PAD.bottom;
  const totals = days.map((_, i) => series.reduce((a, sr) => a + (type === 'bar' ? sr.values[i] : 0), 0));
  let max = niceMax(type === 'bar' ? Math.max(0, ...totals) : Math.max(0, ...series.flatMap((sr) => sr.values)));
  // Counts get whole-number gridlines.
  if (integer) max = Math.max(4, Math.ceil(max / 4) * 4);
  const y = (v) => PAD.top + plotH - (v / max) * plotH;
  const step = plotW / Math.max(1, days.length);
  const sum = series.map((sr) => sr.values.reduce((a, b) => a + b, 0));

  const svg = s('svg', { viewBox: `0 0 ${width} ${H}`, role: 'img', class: `chart-svg ${type}`,
    'aria-label': `${label}: ${series.map((sr, i) => `${sr.label} ${format(sum[i])}`).join(', ')}` });
  for (let i = 0; i <= 4; i++) {
    const v = (max / 4) * i;
    svg.append(s('line', { x1: PAD.left, x2: width - PAD.right, y1: y(v), y2: y(v), class: 'grid' }),
      s('text', { x: PAD.left - 6, y: y(v) + 4, 'text-anchor': 'end', class: 'axis' }, format(v)));
  }
  days.forEach((d, i) => {
    const text = tick(d, i, days);
    if (text) svg.append(s('text', { x: PAD.left + step * (i + 0.5), y: H - 8, 'text-anchor': 'middle', class: 'axis' }, text));
  });
  if (type === 'bar') {
    days.forEach((d, i) => {
      let base = 0;
      series.forEach((sr) => {
        const v = sr.values[i];
        if (v > 0) {
          svg.append(s('rect', { x: PAD.left + step * i + step * 0.15, width: Math.max(1, step * 0.7), y: y(base + v), height: y(base) - y(base + v), class: `mark ${sr.cls}` },
            s('title', {}, `${name(d)} · ${sr.label}: ${format(v)}`)));
        }
        base += v;
      });
    });
  } else {
    series.forEach((sr) => {
      const pts = sr.values.map((v, i) => `${PAD.left + step * (i + 0.5)},${y(v)}`).join(' ');
      svg.append(s('polyline', { points: pts, class: `line ${sr.cls}` }));
      sr.values.forEach((v, i) => svg.append(s('circle', { cx: PAD.left + step * (i + 0.5), cy: y(v), r: 3, class: `mark ${sr.cls}` },
        s('title', {}, `${name(days[i])} · ${sr.label}: ${format(v)}`))));
    });
  }
  el.replaceChildren(svg);
  series.forEach((sr, i) => { el.dataset['total' + sr.key[0].toUpperCase() + sr.key.slice(1)] = String(sum[i]); });
  if (series.length > 1) {
    el.append(h('ul', { class: 'legend' }, series.map((sr) => h('li', {}, h('span', { class: `swatch ${sr.cls}`, 'aria-hidden': 'true' }), sr.label))));
  }
  // The hidden table sits in a hidden box: a table ignores the 1 px height of .visually-hidden
  // and would leave its whole height as blank space below the charts.
  el.append(h('div', { class: 'visually-hidden' }, h('table', {},
    h('caption', {}, label),
    h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, keyLabel), series.map((sr) => h('th', { scope: 'col' }, sr.label)))),
    h('tbody', {}, days.map((d, i) => h('tr', {}, h('th', { scope: 'row' }, full(d)), series.map((sr) => h('td', {}, format(sr.values[i])))))))));
}
