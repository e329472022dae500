import { api } from '../api.js';
import { boot, fmt, t } from '../boot.js';
import { decide, pager, selectColumn } from '../bulk.js';
import { badge, clearFlash, h, showError, table } from '../ui.js';

const form = document.getElementById('filter-form');
const container = document.getElementById('queue');
const more = document.getElementById('more');
const bulkRelease = document.getElementById('bulk-release');
const bulkReject = document.getElementById('bulk-reject');
const count = document.getElementById('selected-count');
const decideForm = document.getElementById('decide-form');
// Members read the queue; owners and admins release and reject.
const canDecide = boot.role !== 'member';
const selected = new Set();

function query(cursor) {
  const q = { state: form.state.value, code: form.code.value, program_id: form.program_id.value,
    affiliate_id: form.affiliate_id.value, from: form.from.value, to: form.to.value, limit: 50, cursor };
  return Object.fromEntries(Object.entries(q).filter(([, v]) => v !== '' && v != null));
}

function updateSelection() {
  bulkRelease.disabled = bulkReject.disabled = selected.size === 0;
  count.textContent = selected.size ? t('review.selected', { n: fmt.number(selected.size) }) : '';
}

const actions = { flag: () => t('review.action_flag'), hold: () => t('review.action_hold') };
const done = { release: (n) => t('review.bulk_released', { n }), reject: (n) => t('review.bulk_rejected', { n }) };

// reasons lists the rules that fired with what they saw; shadow ones are marked.
function reasons(c) {
  const list = h('ul', { class: 'plain' });
  const add = (f, shadow) => list.append(h('li', {}, h('span', { class: 'mono' }, f.code), ' ',
    h('span', { class: 'muted' }, [f.value, actions[f.action](), shadow ? t('review.shadow') : ''].filter(Boolean).join(' · '))));
  c.risk.reasons.forEach((f) => add(f, false));
  (c.risk.shadow || []).forEach((f) => add(f, true));
  return list;
}

// evidence is what the click shows of where it came from; unknown parts are left out.
function evidence(c) {
  const k = c.click;
  if (!k) return h('span', { class: 'muted' }, c.click_id ? t('review.click_pending') : t('review.no_click'));
  const network = [k.asn ? 'AS' + k.asn : '', k.as_org].filter(Boolean).join(' ');
  const device = [k.device_type, k.browser, k.os].filter(Boolean).join(' · ');
  const place = [k.country, k.region, k.city].filter(Boolean).join(' · ');
  const parts = [
    [t('review.click_time'), fmt.dateTime(k.at)],
    [t('review.country'), place],
    [t('review.network'), network + (k.hosting ? ' (' + t('review.hosting') + ')' : '')],
    [t('review.device'), device],
    [t('review.referrer'), k.referrer_domain || k.referrer],
  ].filter(([, v]) => v && v.trim());
  return h('dl', { class: 'evidence' }, ...parts.flatMap(([dt, dd]) => [h('dt', {}, dt), h('dd', {}, dd)]));
}

function state(c) {
  return c.risk.held ? h('span', { class: 'badge held' }, t('review.state_held')) : h('span', { class: 'badge flagged' }, t('review.state_flagged'));
}

function render() {
  const columns = [
    { label: t('conversions.occurred'), render: (c) => fmt.dateTime(c.occurred_at) },
    { label: t('conversions.order'), class: 'mono', render: (c) => c.external_id },
    { label: t('review.partner'), render: (c) => c.affiliate_name || c.affiliate_id },
    { label: t('stats.commission'), class: 'num', render: (c) => fmt.money(c.commission.amount, c.commission.currency) },
    { label: t('review.reasons'), render: reasons },
    { label: t('review.evidence'), render: evidence },
    { label: t('review.state'), render: (c) => h('div', {}, state(c), ' ', badge(c.commission.status)) },
  ];
  if (canDecide) columns.unshift(selectColumn(selected, updateSelection));
  table(container, columns, list.rows, { caption: t('page.review.title'), empty: t('review.empty') });
  more.hidden = !list.cursor;
  updateSelection();
}

const list = pager('/api/fraud/queue', query, form, selected, render);

// decideMany releases or rejects the selected commissions, all or nothing.
function decideMany(action) {
  clearFlash();
  const ids = [...selected];
  return decide(`/api/conversions/${action}`, { ids }, done[action](fmt.number(ids.length)),
    (n) => t('review.bulk_failed', { n }), decideForm, () => list.load());
}

// The filters' programs and partners come from the advertiser's partnerships.
async function fillFilters() {
  try {
    const [programs, partnerships] = await Promise.all([api.get('/api/programs', { limit: 100 }), api.get('/api/partnerships', { limit: 100 })]);
    for (const p of programs.data) form.program_id.append(h('option', { value: p.id }, p.name));
    const seen = new Set();
    for (const p of partnerships.data) {
      if (seen.has(p.affiliate_id)) continue;
      seen.add(p.affiliate_id);
      form.affiliate_id.append(h('option', { value: p.affiliate_id }, p.affiliate_name || p.affiliate_id));
    }
  } catch (err) {
    showError(err);
  }
}

decideForm.addEventListener('submit', (e) => e.preventDefault());
bulkRelease.addEventListener('click', () => decideMany('release'));
bulkReject.addEventListener('click', () => decideMany('reject'));
form.addEventListener('submit', (e) => { e.preventDefault(); clearFlash(); list.load(); });
more.addEventListener('click', () => list.load(true));
decideForm.hidden = !canDecide;
const params = new URLSearchParams(location.search);
if (params.get('state')) form.state.value = params.get('state');
fillFilters();
list.load();
