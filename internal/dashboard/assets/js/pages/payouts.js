import { api } from '../api.js';
import { boot, fmt, t } from '../boot.js';
import { badge, brandCurrency, busy, checkRequired, clearFlash, fieldError, fillCurrencies, flash, h, rowAction, showError, table } from '../ui.js';

const advertiser = boot.kind === 'advertiser';
const canWrite = advertiser && boot.role !== 'member';
const form = document.getElementById('payout-form');
const container = document.getElementById('payouts');

async function load() {
  try {
    const page = await api.get('/api/payouts', { limit: 100 });
    table(container, [
      advertiser && { label: t('payouts.affiliate'), render: (p) => p.affiliate_name || p.affiliate_id },
      !advertiser && { label: t('people.partner.brand'), render: (p) => p.advertiser_name || p.advertiser_id },
      { label: t('payouts.period'), render: (p) => `${fmt.date(p.period_start)} – ${fmt.date(p.period_end)}` },
      { label: t('payouts.count'), class: 'num', render: (p) => fmt.number(p.commission_count) },
      { label: t('payouts.amount'), class: 'num', render: (p) => fmt.money(p.amount, p.currency) },
      { label: t('common.status'), render: (p) => badge(p.status, 'm') },
      canWrite && { label: t('common.actions'), render: (p) => (p.status === 'pending' ? h('div', { class: 'row' },
        actButton(p, 'paid', t('payouts.mark_paid')), actButton(p, 'failed', t('payouts.mark_failed')),
        actButton(p, 'cancel', t('payouts.cancel'), 'danger')) : '') },
    ].filter(Boolean), page.data, { caption: t('payouts.list_title'), empty: t('payouts.empty') });
  } catch (err) {
    showError(err);
  }
}

// actButton's label names the payout, so that a screen reader can tell the rows' buttons apart.
function actButton(p, action, text, cls) {
  const name = t('payouts.action_of', { action: text, amount: fmt.money(p.amount, p.currency), period: `${fmt.date(p.period_start)} – ${fmt.date(p.period_end)}` });
  return h('button', { type: 'button', class: cls, onclick: () => act(p, action), 'aria-label': name }, text);
}

async function act(p, action) {
  clearFlash();
  if (action !== 'paid' && !confirm(t('payouts.confirm_' + action))) return;
  await rowAction(container, p.id, () => api.post(`/api/payouts/${encodeURIComponent(p.id)}/${action}`),
    t('payouts.done_' + action), load);
}

async function loadAffiliates() {
  const ps = (await api.get('/api/partnerships', { status: 'approved', limit: 100 })).data;
  // One option an affiliate, by name (an affiliate partnered in several programs is listed once).
  const affs = new Map(ps.map((p) => [p.affiliate_id, p.affiliate_name || p.affiliate_id]));
  form.affiliate_id.replaceChildren(...[...affs].map(([id, name]) => h('option', { value: id }, name)));
}

// The currency offered first is the one most of the brand's programs pay in (a USD-only
// brand is not offered EUR).
async function defaultCurrency() {
  fillCurrencies(form.currency, (await brandCurrency()) || 'EUR');
}

if (form) {
  // The period ends before period_end: tomorrow includes today's commissions.
  const today = new Date().toISOString().slice(0, 10);
  form.period_end.value = new Date(Date.now() + 864e5).toISOString().slice(0, 10);
  form.period_start.value = today.slice(0, 8) + '01';
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    clearFlash();
    if (!form.affiliate_id.value) { fieldError(form, 'affiliate_id', t('payouts.no_affiliate')); return; }
    if (!checkRequired(form)) return;
    const body = { affiliate_id: form.affiliate_id.value, currency: form.currency.value,
      period_start: form.period_start.value, period_end: form.period_end.value };
    await busy(form, async () => {
      try {
        const p = await api.post('/api/payouts', body);
        flash(t('payouts.created', { amount: fmt.money(p.amount, p.currency), n: fmt.number(p.commission_count) }));
        await load();
      } catch (err) {
        showError(err, form);
      }
    });
  });
  fillCurrencies(form.currency, 'EUR');
  loadAffiliates().catch((err) => showError(err));
  defaultCurrency().catch((err) => showError(err));
}
document.querySelectorAll('[data-writers-only]').forEach((el) => { if (!canWrite) el.hidden = true; });
load();
