import { api } from '../api.js';
import { boot, fmt, t } from '../boot.js';
import { badge, busy, checkRequired, clearFieldErrors, clearFlash, fillCurrencies, flash, focusRow, h, localeAmount, showError, table } from '../ui.js';

const advertiser = boot.kind === 'advertiser';
const canWrite = boot.role !== 'member';
const form = document.getElementById('program-form');
const list = document.getElementById('programs');
const promoSection = document.getElementById('promotions-section');
const promoForm = document.getElementById('promotion-form');
let programs = [];
let partnerships = new Map();
let shownProgram = null;

export function ruleText(rule, currency) {
  if (!rule) return '–';
  const base = rule.type === 'percent' ? t('programs.rule_percent_of', { percent: fmt.number(rule.percent) }) : fmt.money(rule.amount, rule.currency || currency);
  return rule.recurring ? `${base} · ${recurringText(rule.recurring)}` : base;
}

function recurringText(r) {
  return r.lifetime ? t('programs.recurring_lifetime') : t('programs.recurring_for', { n: fmt.number(r.months) });
}

async function listAll(path, query = {}) {
  const out = [];
  let cursor = '';
  do {
    const page = await api.get(path, { ...query, limit: 100, cursor });
    out.push(...page.data);
    cursor = page.next_cursor;
  } while (cursor && out.length < 1000);
  return out;
}

async function load() {
  try {
    programs = await listAll('/api/programs');
    if (!advertiser) partnerships = new Map((await listAll('/api/partnerships')).map((p) => [p.program_id, p]));
  } catch (err) {
    showError(err);
    return;
  }
  const columns = [
    { label: t('programs.name'), render: (p) => (advertiser ? h('div', {}, p.name, h('br'), h('small', { class: 'mono muted' }, p.id)) : p.name) },
    { label: t('programs.rule'), class: 'num', render: (p) => ruleText(p.commission, p.currency) },
    { label: t('programs.window'), class: 'num', render: (p) => t('programs.days', { n: fmt.number(p.attribution_window_days) }) },
    { label: t('programs.visibility'), render: (p) => t('programs.visibility_' + p.visibility) },
  ];
  if (advertiser) {
    columns.push({ label: t('common.status'), render: (p) => badge(p.status, 'm') });
    columns.push({ label: t('common.actions'), render: (p) => h('div', { class: 'row' },
      canWrite && h('button', { type: 'button', onclick: () => edit(p), 'aria-label': t('programs.edit_of', { name: p.name }) }, t('common.edit')),
      h('button', { type: 'button', onclick: () => showPromotions(p), 'aria-label': t('promotions.of', { name: p.name }) }, t('promotions.title'))) });
  } else {
    columns.push({ label: t('programs.partnership'), render: (p) => {
      const ps = partnerships.get(p.id);
      if (ps) return badge(ps.status);
      return canWrite ? h('button', { type: 'button', class: 'primary', onclick: () => apply(p), 'aria-label': t('programs.apply_to', { name: p.name }) }, t('programs.apply')) : '–';
    } });
    columns.push({ label: t('common.actions'), render: (p) => h('button', { type: 'button', onclick: () => showPromotions(p), 'aria-label': t('promotions.of', { name: p.name }) }, t('promotions.title')) });
  }
  table(list, columns, programs, { caption: t('programs.list_title'), empty: advertiser ? t('programs.empty') : t('programs.empty_browse') });
}

// apply joins (or asks to join) a program; the keyboard stays on the program's row, whose
// button became its partnership's status.
async function apply(p, form) {
  clearFlash();
  try {
    const ps = await api.post('/api/partnerships', { program_id: p.id });
    flash(ps.status === 'approved' ? t('programs.applied_approved', { name: p.name }) : t('programs.applied_pending', { name: p.name }));
    await load();
    focusRow(list, p.id);
    return true;
  } catch (err) {
    showError(err, form);
    return false;
  }
}

function setMode(edit) {
  document.querySelectorAll('[data-form-mode]').forEach((el) => { el.hidden = el.dataset.formMode !== (edit ? 'edit' : 'create'); });
  // A program's currency cannot change: the list is shut while editing.
  if (form) form.currency.disabled = edit;
}

function edit(p) {
  clearFlash();
  form.id.value = p.id;
  form.name.value = p.name;
  form.landing_url.value = p.landing_url;
  form.currency.value = p.currency;
  form.rule.value = p.commission.type;
  form.value.value = p.commission.type === 'percent' ? p.commission.percent : p.commission.amount;
  const rec = p.commission.recurring;
  form.recurring.value = rec ? (rec.lifetime ? 'lifetime' : 'months') : '';
  form.recurring_months.value = rec && rec.months ? rec.months : 12;
  form.customer_window_days.value = p.customer_window_days ?? '';
  form.attribution_rule.value = p.attribution_rule;
  form.attribution_window_days.value = p.attribution_window_days;
  form.hold_days.value = p.hold_days ?? '';
  form.visibility.value = p.visibility;
  form.status.value = p.status;
  showRecurringMonths();
  clearFieldErrors(form);
  setMode(true);
  form.name.focus();
}

function programBody() {
  const rule = form.rule.value;
  // Amounts and percents are typed as the page writes them ("12,50" in Spanish).
  const value = localeAmount(form.value.value);
  const commission = rule === 'percent' ? { type: rule, percent: value } : { type: rule, amount: value };
  if (form.recurring.value === 'lifetime') commission.recurring = { lifetime: true };
  if (form.recurring.value === 'months') commission.recurring = { months: Number(form.recurring_months.value) };
  const body = {
    name: form.name.value.trim(),
    landing_url: form.landing_url.value.trim(),
    currency: form.currency.value,
    commission,
    attribution_rule: form.attribution_rule.value,
    customer_window_days: form.customer_window_days.value === '' ? null : Number(form.customer_window_days.value),
    visibility: form.visibility.value,
    status: form.status.value,
    hold_days: form.hold_days.value === '' ? null : Number(form.hold_days.value),
  };
  if (form.attribution_window_days.value) body.attribution_window_days = Number(form.attribution_window_days.value);
  return body;
}

// The months of recurring commission are asked only when renewals earn for some months.
function showRecurringMonths() {
  document.getElementById('p-recurring-months-field').hidden = form.recurring.value !== 'months';
}

if (form) {
  fillCurrencies(form.currency, 'EUR');
  form.recurring.addEventListener('change', showRecurringMonths);
  showRecurringMonths();
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    clearFlash();
    if (!checkRequired(form)) return;
    await busy(form, async () => {
      try {
        if (form.id.value) {
          await api.patch(`/api/programs/${encodeURIComponent(form.id.value)}`, programBody());
          flash(t('programs.saved'));
        } else {
          await api.post('/api/programs', programBody());
          flash(t('programs.created'));
        }
        form.reset();
        form.id.value = '';
        showRecurringMonths();
        setMode(false);
        await load();
      } catch (err) {
        showError(err, form);
      }
    });
  });
  document.getElementById('program-cancel').addEventListener('click', () => {
    form.reset(); form.id.value = ''; showRecurringMonths(); clearFieldErrors(form); setMode(false);
  });
  setMode(false);
}

async function showPromotions(p) {
  if (shownProgram && shownProgram.id !== p.id) resetPromoForm();
  shownProgram = p;
  promoSection.hidden = false;
  document.getElementById('promotions-of').textContent = p.name;
  promoForm.hidden = !(advertiser && canWrite);
  try {
    const promos = await listAll(`/api/programs/${encodeURIComponent(p.id)}/promotions`);
    table(document.getElementById('promotions'), [
      { label: t('promotions.title_label'), render: (x) => x.title },
      { label: t('promotions.coupon'), class: 'mono', render: (x) => x.coupon_code || '–' },
      { label: t('promotions.starts'), render: (x) => fmt.date(x.starts_at) },
      { label: t('promotions.ends'), render: (x) => fmt.date(x.ends_at) },
      { label: t('common.status'), render: (x) => badge(x.active ? 'active' : 'paused') },
      advertiser && canWrite && { label: t('common.actions'), render: (x) => h('button', { type: 'button', onclick: () => editPromotion(x),
        'aria-label': t('promotions.edit_of', { title: x.title }) }, t('common.edit')) },
    ].filter(Boolean), promos, { caption: t('promotions.title'), empty: t('promotions.empty') });
  } catch (err) {
    showError(err);
  }
  document.getElementById('promotions-title').focus();
}

function dayStart(v) { return v ? `${v}T00:00:00Z` : null; }

// The promotion form adds a promotion, or changes the one it was filled with.
function setPromoMode(edit) {
  promoForm.querySelectorAll('[data-promo-mode]').forEach((el) => { el.hidden = el.dataset.promoMode !== (edit ? 'edit' : 'create'); });
}

function resetPromoForm() {
  promoForm.reset();
  clearFieldErrors(promoForm);
  promoForm.id.value = '';
  setPromoMode(false);
}

function editPromotion(x) {
  clearFlash();
  promoForm.id.value = x.id;
  promoForm.title.value = x.title;
  promoForm.coupon_code.value = x.coupon_code || '';
  promoForm.landing_url.value = x.landing_url || '';
  // The days are UTC days, as they are sent.
  promoForm.starts_at.value = x.starts_at ? x.starts_at.slice(0, 10) : '';
  promoForm.ends_at.value = x.ends_at ? x.ends_at.slice(0, 10) : '';
  setPromoMode(true);
  promoForm.title.focus();
}

promoForm.addEventListener('submit', async (e) => {
  e.preventDefault();
  clearFlash();
  if (!checkRequired(promoForm)) return;
  const body = { title: promoForm.title.value.trim(), coupon_code: promoForm.coupon_code.value.trim() || null,
    landing_url: promoForm.landing_url.value.trim() || null, starts_at: dayStart(promoForm.starts_at.value), ends_at: dayStart(promoForm.ends_at.value) };
  await busy(promoForm, async () => {
    try {
      if (promoForm.id.value) {
        // Empty fields are sent as null, which clears them.
        await api.patch(`/api/promotions/${encodeURIComponent(promoForm.id.value)}`, body);
        flash(t('promotions.saved'));
      } else {
        await api.post(`/api/programs/${encodeURIComponent(shownProgram.id)}/promotions`, body);
        flash(t('promotions.created'));
      }
      resetPromoForm();
      await showPromotions(shownProgram);
    } catch (err) {
      showError(err, promoForm);
    }
  });
});

document.getElementById('promotion-cancel').addEventListener('click', () => { resetPromoForm(); clearFlash(); promoForm.title.focus(); });

const applyForm = document.getElementById('apply-form');
if (applyForm) {
  applyForm.addEventListener('submit', (e) => {
    e.preventDefault();
    if (!checkRequired(applyForm)) return;
    const id = applyForm.program_id.value.trim();
    apply({ id, name: id }, applyForm).then((ok) => { if (ok) applyForm.reset(); });
  });
}

document.querySelectorAll('[data-writers-only]').forEach((el) => { if (!canWrite) el.hidden = true; });
load();
