import { api, withQuery } from '../api.js';
import { boot, fmt, t } from '../boot.js';
import { decide as decideBulk, pager, selectColumn } from '../bulk.js';
import { badge, clearFieldErrors, clearFlash, h, rowAction, table } from '../ui.js';

const form = document.getElementById('filter-form');
const container = document.getElementById('conversions');
const more = document.getElementById('more');
const bulkApprove = document.getElementById('bulk-approve');
const bulkReject = document.getElementById('bulk-reject');
const count = document.getElementById('selected-count');
// The reason of a rejection, of one row or of the selected ones, is a field of its own, where
// a refusal of it is marked.
const decideForm = document.getElementById('decide-form');
const advertiser = boot.kind === 'advertiser';
const canDecide = advertiser && boot.role !== 'member';
const selected = new Set();

function filters() {
  return { status: form.status.value, from: form.from.value, to: form.to.value };
}

function query(cursor) {
  return { ...filters(), limit: 50, cursor };
}

// The download link exports what the filters select, all pages at once.
function updateExport() {
  document.getElementById('export').href = withQuery('/api/conversions.csv', filters());
}

function updateSelection() {
  bulkApprove.disabled = bulkReject.disabled = selected.size === 0;
  count.textContent = selected.size ? t('conversions.selected', { n: fmt.number(selected.size) }) : '';
}

// attribution says what put the conversion on the affiliate, and the click, code or customer
// behind it.
function attribution(c) {
  const ref = { click: c.click_id, coupon: c.coupon_code, customer: c.customer_id }[c.attribution];
  return h('div', {}, t('attribution.' + c.attribution), ref ? h('br') : '', ref ? h('small', { class: 'mono muted' }, ref) : '');
}

// sale shows the amount in the program currency and, for a sale reported in another
// currency, what was reported and the rate it was converted with.
function sale(c) {
  const amount = fmt.money(c.amount, c.currency);
  if (!c.original_currency) return amount;
  return h('span', {}, amount, h('span', { class: 'sub muted' }, t('conversions.original', {
    amount: fmt.money(c.original_amount, c.original_currency), rate: c.exchange_rate, date: fmt.date(c.rate_date) })));
}

function render() {
  const columns = [
    { label: t('conversions.occurred'), render: (c) => fmt.dateTime(c.occurred_at) },
    { label: t('conversions.order'), class: 'mono', render: (c) => c.external_id },
    advertiser ? { label: t('partnerships.affiliate'), render: (c) => c.affiliate_name || c.affiliate_id }
      : { label: t('people.partner.brand'), render: (c) => c.advertiser_name || c.advertiser_id },
    { label: t('conversions.type'), render: (c) => t('conversion_type.' + c.type) },
    { label: t('conversions.attribution'), render: attribution },
    { label: t('conversions.sale'), class: 'num', render: sale },
    { label: t('stats.commission'), class: 'num', render: (c) => fmt.money(c.commission.amount, c.commission.currency) },
    { label: t('common.status'), render: (c) => badge(c.commission.status) },
  ];
  if (canDecide) {
    columns.unshift(selectColumn(selected, updateSelection, (c) => c.commission.status === 'pending'));
    columns.push({ label: t('common.actions'), render: (c) => (c.commission.status === 'pending' ? h('div', { class: 'row' },
      h('button', { type: 'button', onclick: () => decide(c, 'approve'), 'aria-label': t('conversions.approve_one', { order: c.external_id }) }, t('conversions.approve')),
      h('button', { type: 'button', class: 'danger', onclick: () => decide(c, 'reject'), 'aria-label': t('conversions.reject_one', { order: c.external_id }) }, t('conversions.reject'))) : '') });
  }
  table(container, columns, list.rows, { caption: t('page.conversions.title'), empty: t('conversions.empty') });
  more.hidden = !list.cursor;
  updateSelection();
}

// A refused filter is marked on its field.
const list = pager('/api/conversions', query, form, selected, render);
const load = list.load;

// reasonBody is the body of a decision: a rejection carries the reason typed, if any.
function reasonBody(action, body = {}) {
  const reason = decideForm.reason.value.trim();
  if (action === 'reject' && reason) body.reason = reason;
  clearFieldErrors(decideForm);
  return body;
}

async function decide(c, action) {
  clearFlash();
  const body = reasonBody(action);
  await rowAction(container, c.id, async () => {
    await api.post(`/api/conversions/${encodeURIComponent(c.id)}/${action}`, body);
    if (body.reason) decideForm.reason.value = '';
  }, t(action === 'approve' ? 'conversions.approved' : 'conversions.rejected', { order: c.external_id }), load, decideForm);
}

// The bulk decisions differ only in their route and their messages.
const bulkDecisions = {
  approve: {
    done: (n) => t('conversions.bulk_approved', { n }),
    failed: (n) => t('conversions.bulk_failed', { n }),
  },
  reject: {
    done: (n) => t('conversions.bulk_rejected', { n }),
    failed: (n) => t('conversions.bulk_reject_failed', { n }),
  },
};

async function decideMany(action) {
  clearFlash();
  const d = bulkDecisions[action];
  const ids = [...selected];
  const body = reasonBody(action, { ids });
  if (await decideBulk(`/api/conversions/${action}`, body, d.done(fmt.number(ids.length)), d.failed, decideForm, load) && body.reason) {
    decideForm.reason.value = '';
  }
}

decideForm.addEventListener('submit', (e) => e.preventDefault());
bulkApprove.addEventListener('click', () => decideMany('approve'));
bulkReject.addEventListener('click', () => decideMany('reject'));
form.addEventListener('submit', (e) => { e.preventDefault(); clearFlash(); load(); });
form.addEventListener('change', updateExport);
updateExport();
more.addEventListener('click', () => load(true));
document.querySelectorAll('[data-advertiser-only]').forEach((el) => { el.hidden = !canDecide; });
load();
