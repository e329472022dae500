// Where clicks come from: the clicks of a period per hour in a chosen time zone, and tables by
// country, device, browser, OS, referrer and UTM parameters, all filtered alike. The filters
// live in the address (?from=&to=&tz=&country=&device=), so a view can be shared and the
// language switch keeps it.
import { api, withQuery } from '../api.js';
import { boot, fmt, locale, t } from '../boot.js';
import { chart } from '../chart.js';
import { brandCurrency, clearFieldErrors, clearFlash, fieldError, flash, h, problemMessage, showError, table } from '../ui.js';

const form = document.getElementById('traffic-form');
const currencyField = document.getElementById('currency-field');
const figure = document.getElementById('chart-hours');
const plot = figure.querySelector('.plot');
const holders = [...document.querySelectorAll('[data-dimension]')];

// The API reports by hour at most this many days; a longer period is charted by day.
const MAX_HOUR_DAYS = 31;
// Rows read per table (the rest is counted in has_more), and rows shown before "Show all".
const LIMIT = 100, SHOWN = 10;

const browserZone = Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';
const regionNames = new Intl.DisplayNames([locale], { type: 'region' });

// todayIn is today's date in zone, as YYYY-MM-DD (en-CA writes dates that way); in the
// browser's zone when the browser does not know zone (an address naming none: the API then
// says so under the field).
function todayIn(zone) {
  let f;
  try {
    f = new Intl.DateTimeFormat('en-CA', { timeZone: zone });
  } catch {
    f = new Intl.DateTimeFormat('en-CA');
  }
  return f.format(new Date());
}
const dayNumber = (d) => Date.parse(d + 'T00:00:00Z') / 864e5;
const isoDay = (n) => new Date(n * 864e5).toISOString().slice(0, 10);

// The zones offered: the browser's list of IANA names, with the browser's own, UTC and the
// one asked for in the address.
function fillZones(chosen) {
  const zones = new Set(Intl.supportedValuesOf ? Intl.supportedValuesOf('timeZone') : []);
  for (const z of [browserZone, 'UTC', chosen]) if (z) zones.add(z);
  form.tz.replaceChildren(...[...zones].sort().map((z) => h('option', { value: z }, z.replaceAll('_', ' '))));
  form.tz.value = chosen;
}

// countries seen on this page, so that the country filter keeps offering them while one is
// chosen (the table then shows that one alone).
const countries = new Set();

function fillCountries(chosen) {
  if (chosen) countries.add(chosen);
  const known = [...countries].filter(Boolean).map((c) => [c, countryName(c)]).sort((a, b) => a[1].localeCompare(b[1], locale));
  form.country.replaceChildren(form.country.options[0], ...known.map(([c, n]) => h('option', { value: c }, n)));
  form.country.value = chosen;
}

function countryName(code) {
  try {
    return regionNames.of(code) || code;
  } catch {
    return code; // a code Intl does not take
  }
}

// label is how a dimension's value reads: "" is unknown (a click without a referrer came
// straight: typed, bookmarked, from an app), a country its name in the page's language, a
// device type its word.
function label(dim, v) {
  if ((v === '' || v == null) && dim === 'referrer') return t('traffic.direct');
  if (v === '' || v == null) return t('traffic.unknown');
  if (dim === 'country') return countryName(v);
  if (dim === 'device') return boot.messages['traffic.device_' + v] || v;
  return String(v);
}

// The view's filters, from the address at first, from the form after.
function readAddress() {
  const q = new URLSearchParams(location.search);
  const tz = q.get('tz') || browserZone;
  const to = q.get('to') || todayIn(tz);
  return { tz, to, from: q.get('from') || isoDay(dayNumber(to) - 6), country: q.get('country') || '', device: q.get('device') || '' };
}

function filters() {
  return { from: form.from.value, to: form.to.value, tz: form.tz.value, country: form.country.value, device: form.device.value };
}

// remember puts the view in the address (beside what else it holds: ?lang=) and in the
// language switch's links.
function remember(f) {
  const q = Object.fromEntries(new URLSearchParams(location.search));
  history.replaceState(null, '', withQuery(location.pathname, { ...q, ...f }));
  document.querySelectorAll('.langs a[data-locale]').forEach((a) => {
    a.href = withQuery(location.pathname, { ...q, ...f, lang: a.dataset.locale });
  });
}

// fallback is the currency of a period without commissions (an advertiser's programs').
let fallback = '';
let reports = null;

async function load() {
  clearFlash();
  const f = filters();
  remember(f);
  // Each table's download link exports that table's report of the view.
  holders.forEach((el) => {
    document.getElementById('export-' + el.dataset.dimension).href = withQuery('/api/stats.csv', { ...f, group_by: el.dataset.dimension });
  });
  const days = dayNumber(f.to) - dayNumber(f.from) + 1;
  const by = days <= MAX_HOUR_DAYS ? 'hour' : 'day';
  plot.setAttribute('aria-busy', 'true');
  holders.forEach((el) => el.setAttribute('aria-busy', 'true'));
  // Each table is its own request: one the API refuses leaves the others shown.
  const asks = [api.get('/api/stats', { ...f, group_by: by }),
    ...holders.map((el) => api.get('/api/stats', { ...f, group_by: el.dataset.dimension, limit: LIMIT }))];
  const got = await Promise.allSettled(asks);
  plot.removeAttribute('aria-busy');
  holders.forEach((el) => el.removeAttribute('aria-busy'));
  const [series] = got;
  if (series.status === 'rejected') {
    // A refused period or zone is marked on its field.
    showError(series.reason, form);
    plot.replaceChildren(h('p', { class: 'empty' }, problemMessage(series.reason)));
  } else {
    clearFieldErrors(form);
  }
  reports = { by, series: series.value, dims: got.slice(1) };
  for (const r of reports.dims) {
    if (r.status === 'fulfilled' && r.value.group_by === 'country') r.value.data.forEach((row) => countries.add(row.country));
  }
  fillCountries(f.country);
  // Money is never summed across currencies: with several, a switch picks the one shown.
  const currencies = [...new Set(got.filter((r) => r.status === 'fulfilled').flatMap((r) => r.value.currencies))].sort();
  const keep = form.currency.value;
  form.currency.replaceChildren(...currencies.map((c) => h('option', { value: c }, c)));
  if (currencies.includes(keep)) form.currency.value = keep;
  currencyField.hidden = currencies.length < 2;
  render();
}

// render draws the chart and the tables, their money in the chosen currency.
function render() {
  const { by, series, dims } = reports;
  const cur = form.currency.value || (series && series.currency) || fallback;
  const tz = form.tz.value;
  figure.querySelector('figcaption').textContent = t(by === 'hour' ? 'traffic.chart_hours' : 'traffic.chart_days', { tz: tz.replaceAll('_', ' ') });
  if (series) drawChart(series, by);
  dims.forEach((r, i) => drawTable(holders[i], r, cur));
  if (series && series.totals.clicks === 0 && series.totals.conversions.total === 0) flash(t('traffic.no_data'), 'info');
}

// hourOf reads an hour label of the API ("2026-10-25T02:00:00+02:00": its local start and
// offset) without the browser's zone, which need not be the report's.
const hourFmt = new Intl.DateTimeFormat(locale, { hour: 'numeric', minute: '2-digit', timeZone: 'UTC' });
function hourOf(key) {
  const [hh, mm] = [Number(key.slice(11, 13)), Number(key.slice(14, 16))];
  return { day: key.slice(0, 10), hh, mm, offset: key.slice(19), time: hourFmt.format(Date.UTC(2000, 0, 1, hh, mm)) };
}

function drawChart(report, by) {
  const keys = report.data.map((r) => r[by]);
  const opts = { days: keys, label: figure.querySelector('figcaption').textContent, format: fmt.number, integer: true,
    // Across a wide page the chart is drawn at its width; on a phone, shrunk like the overview's.
    width: Math.max(640, Math.round(plot.clientWidth)),
    series: [{ key: 'clicks', label: t('stats.clicks'), values: report.data.map((r) => r.clicks), cls: 's1' }] };
  if (by === 'hour') {
    // The hour a change from daylight saving time repeats is told apart by its offset.
    const seen = new Map();
    keys.forEach((k) => { const x = k.slice(0, 16); seen.set(x, (seen.get(x) || 0) + 1); });
    const name = (k) => {
      const x = hourOf(k);
      return `${fmt.day(x.day)} ${x.time}${seen.get(k.slice(0, 16)) > 1 ? ` (UTC${x.offset})` : ''}`;
    };
    // A day or two shows hours every three or six; longer periods their days' midnights.
    const nDays = new Set(keys.map((k) => k.slice(0, 10))).size;
    const tick = (k, i) => {
      const x = hourOf(k);
      if (nDays <= 2) return x.mm === 0 && x.hh % (nDays === 1 ? 3 : 6) === 0 ? (x.hh === 0 ? fmt.day(x.day) : x.time) : '';
      const first = i === 0 || keys[i - 1].slice(0, 10) !== x.day;
      return first && (dayNumber(x.day) - dayNumber(keys[0].slice(0, 10))) % Math.ceil(nDays / 8) === 0 ? fmt.day(x.day) : '';
    };
    Object.assign(opts, { name, full: name, tick, keyLabel: t('traffic.hour') });
  }
  chart(plot, opts);
}

// name is a row's value; one the filters take (a known country or device type) is a button
// that narrows the page to it.
function name(dim, v) {
  const text = label(dim, v);
  const filter = form.elements[dim];
  if (!v || !filter || filter.value === v) return text;
  return h('button', { type: 'button', class: 'link', title: t('traffic.only', { name: text }), 'aria-label': t('traffic.only', { name: text }),
    onclick: () => {
      if (dim === 'country') fillCountries(v);
      filter.value = v;
      form.requestSubmit();
    } }, text);
}

// drawTable shows one dimension's report: its first rows, all of them on demand.
function drawTable(holder, result, cur) {
  const dim = holder.dataset.dimension;
  if (result.status === 'rejected') {
    holder.replaceChildren(h('p', { class: 'empty' }, problemMessage(result.reason)));
    return;
  }
  const report = result.value;
  const inCur = (r) => r.amounts.find((a) => a.currency === cur) || { commission: r.commission ?? '0', epc: r.epc ?? '0' };
  const money = (v) => (cur ? fmt.money(v, cur) : '–');
  const title = t('traffic.dim_' + dim);
  const columns = [
    { label: t('traffic.col_' + dim), render: (r) => name(dim, r[dim]) },
    { label: t('stats.clicks'), class: 'num', render: (r) => fmt.number(r.clicks) },
    { label: t('traffic.unique_clicks'), class: 'num', render: (r) => fmt.number(r.unique_clicks) },
    { label: t('stats.conversions'), class: 'num', render: (r) => fmt.number(r.conversions.total) },
    { label: t('stats.commission'), class: 'num', render: (r) => money(inCur(r).commission) },
    { label: t('traffic.epc'), class: 'num', render: (r) => money(inCur(r).epc) },
  ];
  const all = holder.dataset.all === 'yes';
  table(holder, columns, all ? report.data : report.data.slice(0, SHOWN), { caption: title, empty: t('traffic.empty') });
  holder.querySelectorAll('tbody tr').forEach((tr, i) => { tr.dataset.key = String(report.data[i][dim] ?? ''); });
  if (!all && report.data.length > SHOWN) {
    holder.append(h('button', { type: 'button', class: 'link', 'aria-label': t('traffic.show_all_of', { what: title, n: fmt.number(report.data.length) }),
      onclick: () => {
        holder.dataset.all = 'yes';
        drawTable(holder, result, cur);
        holder.querySelectorAll('tbody tr')[SHOWN]?.setAttribute('tabindex', '-1');
        holder.querySelectorAll('tbody tr')[SHOWN]?.focus();
      } }, t('traffic.show_all', { n: fmt.number(report.data.length) })));
  }
  if (all && report.has_more) holder.append(h('p', { class: 'muted' }, t('traffic.top', { n: fmt.number(report.data.length) })));
}

form.currency.addEventListener('change', () => { if (reports) render(); });

form.addEventListener('submit', (e) => {
  e.preventDefault();
  if (!form.from.value || !form.to.value) {
    fieldError(form, form.from.value ? 'to' : 'from', t('forms.field.required'));
    return;
  }
  if (form.from.value > form.to.value) {
    fieldError(form, 'to', t('overview.bad_range'));
    return;
  }
  holders.forEach((el) => { delete el.dataset.all; });
  load();
});

async function start() {
  const f = readAddress();
  fillZones(f.tz);
  form.from.value = f.from;
  form.to.value = f.to;
  form.device.value = [...form.device.options].some((o) => o.value === f.device) ? f.device : '';
  fillCountries(f.country);
  if (boot.kind === 'advertiser') {
    try { fallback = await brandCurrency(); } catch { /* the money shows dashes */ }
  }
  await load();
}

start();
