import { api, withQuery } from '../api.js';
import { boot, fmt, t } from '../boot.js';
import { chart } from '../chart.js';
import { brandCurrency, clearFlash, flash, h, showError } from '../ui.js';

const form = document.getElementById('range-form');
const totalsEl = document.getElementById('totals');
const currencyField = document.getElementById('currency-field');
let report;
// fallback is the currency of a period without commissions: an advertiser's figures are then
// zeros in its programs' currency; an affiliate's, with no currency to show, are dashes.
let fallback = '';

function isoDay(d) { return d.toISOString().slice(0, 10); }

const today = new Date();
form.to.value = isoDay(today);
form.from.value = isoDay(new Date(today.getTime() - 29 * 864e5));

// The download link exports the report of the range shown.
function updateExport() {
  document.getElementById('export').href = withQuery('/api/stats.csv', { group_by: 'day', from: form.from.value, to: form.to.value });
}
form.addEventListener('change', updateExport);
updateExport();

async function load() {
  clearFlash();
  totalsEl.setAttribute('aria-busy', 'true');
  try {
    report = await api.get('/api/stats', { group_by: 'day', from: form.from.value, to: form.to.value });
  } catch (err) {
    showError(err);
    return;
  } finally {
    totalsEl.removeAttribute('aria-busy');
  }
  // Money is never summed across currencies: with several, a switch picks the one shown.
  const keep = form.currency.value;
  form.currency.replaceChildren(...report.currencies.map((c) => h('option', { value: c }, c)));
  if (report.currencies.includes(keep)) form.currency.value = keep;
  currencyField.hidden = report.currencies.length < 2;
  render();
}

// render draws the report, its money in the chosen currency.
function render() {
  const cur = form.currency.value || report.currency || fallback;
  // The figures of a row (or the totals) in the chosen currency; none without conversions.
  const inCur = (fig) => fig.amounts.find((a) => a.currency === cur) || { commission: fig.commission ?? '0', epc: fig.epc ?? '0' };
  const money = cur ? (v) => fmt.money(String(v), cur) : fmt.number;
  const tot = report.totals;
  const set = (k, v) => { totalsEl.querySelector(`[data-total="${k}"]`).textContent = v; };
  set('clicks', fmt.number(tot.clicks));
  set('conversions', fmt.number(tot.conversions.total));
  set('commission', fmt.money(inCur(tot).commission, cur));
  set('epc', fmt.money(inCur(tot).epc, cur));

  const days = report.data.map((r) => r.day);
  const col = (f) => report.data.map(f);
  const plot = (id) => document.querySelector(`#${id} .plot`);
  const label = (id) => document.querySelector(`#${id} figcaption`).textContent;
  chart(plot('chart-clicks'), { days, label: label('chart-clicks'), format: fmt.number, integer: true, series: [
    { key: 'clicks', label: t('stats.clicks'), values: col((r) => r.clicks), cls: 's1' },
  ] });
  chart(plot('chart-conversions'), { days, label: label('chart-conversions'), format: fmt.number, integer: true, series: [
    { key: 'approved', label: t('status.approved'), values: col((r) => r.conversions.approved + r.conversions.paid), cls: 's2' },
    { key: 'pending', label: t('status.pending'), values: col((r) => r.conversions.pending), cls: 's3' },
  ] });
  chart(plot('chart-commission'), { days, label: label('chart-commission'), type: 'line', format: money, series: [
    { key: 'commission', label: cur ? `${t('stats.commission')} (${cur})` : t('stats.commission'), values: col((r) => Number(inCur(r).commission)), cls: 's2' },
  ] });
  chart(plot('chart-epc'), { days, label: label('chart-epc'), type: 'line', format: money, series: [
    { key: 'epc', label: cur ? `${t('stats.epc')} (${cur})` : t('stats.epc'), values: col((r) => Number(inCur(r).epc)), cls: 's4' },
  ] });
  if (tot.clicks === 0 && tot.conversions.total === 0) flash(t('overview.no_data'), 'info');
}

form.currency.addEventListener('change', () => { if (report) render(); });

async function start() {
  if (boot.kind === 'advertiser') {
    try { fallback = await brandCurrency(); } catch { /* the figures show dashes */ }
  }
  await load();
}

form.addEventListener('submit', (e) => {
  e.preventDefault();
  if (form.from.value > form.to.value) {
    flash(t('overview.bad_range'), 'error');
    return;
  }
  load();
});

start();
