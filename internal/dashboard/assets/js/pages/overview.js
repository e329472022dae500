import { api, withQuery } from '../api.js';
import { boot, fmt, t } from '../boot.js';
import { chart } from '../chart.js';
import { brandCurrency, clearFieldErrors, clearFlash, fieldError, flash, h, showError, table } from '../ui.js';
import { renderOnboarding, wireDismiss } from '../onboarding.js';

const form = document.getElementById('range-form');
const totalsEl = document.getElementById('totals');
const currencyField = document.getElementById('currency-field');
let report;
// fallback is the currency of a period without commissions: an advertiser's figures are then
// zeros in its programs' currency; an affiliate's, with no currency to show, are dashes.
let fallback = '';

// The figures are the user's days: the API cuts them in the browser's time zone.
const tz = Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';

// isoDay is a date of the browser's calendar, as YYYY-MM-DD.
function isoDay(d) {
  const pad = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
}

const today = new Date();
form.to.value = isoDay(today);
form.from.value = isoDay(new Date(today.getFullYear(), today.getMonth(), today.getDate() - 29));

// The download link exports the report of the range shown.
function updateExport() {
  document.getElementById('export').href = withQuery('/api/stats.csv', { group_by: 'day', from: form.from.value, to: form.to.value, tz });
}
form.addEventListener('change', updateExport);
updateExport();

async function load() {
  leaderRows = null;
  clearFlash();
  totalsEl.setAttribute('aria-busy', 'true');
  try {
    report = await api.get('/api/stats', { group_by: 'day', from: form.from.value, to: form.to.value, tz });
    clearFieldErrors(form);
  } catch (err) {
    // A refused range is marked on its dates.
    showError(err, form);
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
  if (boot.kind === 'advertiser') leaders(cur);
}

// leaders is the brand's partner leaderboard of the period: the ten affiliates that earned the
// most commission in the chosen currency, then by clicks.
// Its rows are read once per period shown (load clears them): a currency switch only sorts
// them again.
let leaderRows = null;
// partners maps the brand's affiliates' ids to their names: the statistics know ids only.
let partners = null;

async function partnerNames() {
  const names = new Map();
  let cursor = '';
  do {
    const page = await api.get('/api/partnerships', { limit: 100, cursor });
    for (const p of page.data) names.set(p.affiliate_id, p.affiliate_name);
    cursor = page.next_cursor;
  } while (cursor && names.size < 1000);
  return names;
}

async function leaders(cur) {
  const section = document.getElementById('leaders-section');
  try {
    leaderRows ??= (await api.get('/api/stats', { group_by: 'affiliate', from: form.from.value, to: form.to.value, tz, limit: 1000 })).data;
    partners ??= await partnerNames();
  } catch (err) {
    showError(err);
    return;
  }
  const rows = [...leaderRows];
  const earned = (r) => Number((r.amounts.find((a) => a.currency === cur) || { commission: 0 }).commission);
  const inCur = (r) => r.amounts.find((a) => a.currency === cur) || { commission: '0', epc: '0' };
  rows.sort((a, b) => earned(b) - earned(a) || b.clicks - a.clicks);
  section.hidden = rows.length === 0;
  table(document.getElementById('leaders'), [
    { label: t('overview.rank'), class: 'num', render: (r) => fmt.number(rows.indexOf(r) + 1) },
    { label: t('overview.partner'), render: (r) => partners.get(r.affiliate_id) || r.affiliate_id },
    { label: t('stats.clicks'), class: 'num', render: (r) => fmt.number(r.clicks) },
    { label: t('stats.conversions'), class: 'num', render: (r) => fmt.number(r.conversions.total) },
    { label: t('stats.commission'), class: 'num', render: (r) => (cur ? fmt.money(inCur(r).commission, cur) : '–') },
    { label: t('stats.epc'), class: 'num', render: (r) => (cur ? fmt.money(inCur(r).epc, cur) : '–') },
  ], rows.slice(0, 10), { caption: t('overview.leaders') });
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
    fieldError(form, 'to', t('overview.bad_range'));
    return;
  }
  load();
});

start();

// A brand sees its first steps above the charts until they are done or dismissed.
const onboarding = document.getElementById('onboarding');
if (onboarding && boot.kind === 'advertiser') {
  wireDismiss(onboarding);
  renderOnboarding(onboarding);
}
